#!/usr/bin/env bash
# The H100 runs behind evidence/h100_hopper_*.json (the Hopper questions), as one command.
#
#   bash tools/device/hopper_questions.sh [STAGE...]     (results under $OUT, default /tmp/tcsmt-out)
#
# Runs from a staged copy of tcsmt on PYTHONPATH (STAGE_DIR, default ./stage: the package tcsmt/ with
# models/ inside it, as the installed package lays them out) or from an installed tcsmt.
# Stages (default: layouts questions new_paths):
#   layouts    integer layout check of the new kernels (wgmma tf32, wgmma f16 -> f16, mixed fp8)
#   questions  every file of vectors/hopper/ (hand-built and solver-found inputs that separate
#              tcsmt's Hopper model from MMA-Sim's readings and other hypotheses) on mma and wgmma;
#              every row kept ($OUT/h100_hopper_questions.json)
#   new_paths  N random dot products per distribution (six) on each new path, against the model and
#              the competing readings ($OUT/h100_hopper_new_paths.json)
#   k64        the new paths at K = 64 (instructions chained), N64 per distribution
# Environment: N (default 1000000), N64 (default 200000), JOBS (model workers, default 14),
# BUDGET (seconds after which new_paths starts no new path, default 330).
set -u
OUT=${OUT:-/tmp/tcsmt-out}
N=${N:-1000000}
N64=${N64:-200000}
JOBS=${JOBS:-14}
BUDGET=${BUDGET:-330}
DEVICE=${DEVICE:-cuda}  # model:SPEC runs the whole script without a GPU (a test of the script)
STAGE_DIR=${STAGE_DIR:-$PWD/stage}
[ -d "$STAGE_DIR/tcsmt" ] && export PYTHONPATH="$STAGE_DIR${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
VEC=${VEC:-$PWD/vectors/hopper}
log() { echo "[$(date +%T)] $*"; }

NEW="tf32.f32/wgmma,f16.f16/wgmma,e4m3xe5m2.f32/mma,e5m2xe4m3.f32/mma,e4m3xe5m2.f16/mma,e4m3xe5m2.f32/wgmma,e5m2xe4m3.f32/wgmma,e4m3xe5m2.f16/wgmma"
EXTRAS=(--extra hopper:block4 --extra hopper:via_fp32 --extra hopper:no_floor --extra hopper:zero_exponent=-126
        --extra hopper:zero_sign=positive --extra hopper:overflow_result=ieee --extra hopper:one_block_c_after
        --extra hopper:ada_like --extra hopper:e8m13_then_rne16)

log "set-up"
python3 -c "import tcsmt; print('tcsmt', tcsmt.__file__)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"

layouts() {
  python3 - "$OUT/h100_hopper_layouts.json" "$NEW" "$DEVICE" <<'EOF'
import json, sys
from tcsmt.hwcheck.device import get_device
from tcsmt.hwcheck.paths import PATHS
from tcsmt.hwcheck.runner import check_layout
dev = get_device(sys.argv[3])
want = set(sys.argv[2].split(","))
res = [check_layout(s, dev) for s in PATHS.values() if s.label in want]
for r in res:
    print(f"layout {r['path']:22} {'ok' if r['ok'] else 'WRONG'} ({r['wrong']}/{r['n']})")
json.dump({"device": dev.info(), "layouts": res}, open(sys.argv[1], "w"), indent=1)
EOF
}

questions() {
  local args=()
  for f in "$VEC"/*.json "$VEC"/solver/*.json; do
    [ -f "$f" ] || continue
    args+=("$f:mma,wgmma")
  done
  python3 -m tcsmt.hwcheck.questions --device "$DEVICE" --out "$OUT/h100_hopper_questions.json" --force "${args[@]}"
}

new_paths() {
  python3 -m tcsmt.hwcheck.campaign --arch hopper --n "$N" --jobs "$JOBS" --no-layouts --budget "$BUDGET" --device "$DEVICE" \
    --paths "$NEW" "${EXTRAS[@]}" --out "$OUT/h100_hopper_new_paths.json" --force
}

k64() {
  python3 -m tcsmt.hwcheck.campaign --arch hopper --n "$N64" --k 64 --jobs "$JOBS" --no-layouts --device "$DEVICE" \
    --paths "$NEW" --extra hopper:no_floor --out "$OUT/h100_hopper_new_paths_k64.json" --force
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(layouts questions new_paths)
for stage in "${stages[@]}"; do
  log "stage $stage"
  "$stage"
done
log "done"
