#!/usr/bin/env bash
# The hardware runs behind evidence/, as one command on a GPU machine with no network.
#
#   bash tools/device/device_runs.sh STAGE...        (results under $OUT, default /tmp/tcsmt-out)
#
# Set-up: installs tcsmt (no dependencies fetched) and the solver wheels found in .whl/
# (pysmt, z3-solver, bitwuzla for the machine's Python: `pip download --only-binary=:all:
# --python-version 3.12 --platform manylinux2014_x86_64 --no-deps pysmt z3-solver bitwuzla -d .whl`).
# Stages:
#   identify  tcsmt identify --gpu on every Hopper mma/wgmma path with a 16-bit or fp8 input, in
#             parallel and in the background; logs and result tables in $OUT/identify.tgz
#   library_cublas  torch.mm paths (cuBLAS): every path's layout check, then $N random GEMM
#             outputs per distribution against the model and its hypotheses; one raw tile
#             of each distribution kept for fitting ($OUT/library_cublas.npz)
#   library_fp8  torch._scaled_mm e4m3 paths (with and without fast accumulation), likewise
#   k64       every instruction path at K = 64 (instructions chained through the accumulator),
#             $N per distribution, with the floor-less hypothesis beside the model
# Environment: N (default 1000000), TL (identify time limit, s, default 420), JOBS (model workers),
# PATHS (library_cublas) and K64_PATHS (k64): comma-separated path labels instead of all;
# IDENTIFY_PATHS (identify): PATH:INSTR,... instead of the twelve.
set -u
OUT=${OUT:-/tmp/tcsmt-out}
N=${N:-1000000}
TL=${TL:-420}
JOBS=${JOBS:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "[$(date +%T)] $*"; }

log "set-up"
python3 -m pip install -q --no-index --find-links .whl pysmt z3-solver bitwuzla 2>&1 | grep -v -i warn
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warn
python3 -c "import pysmt.shortcuts, bitwuzla, z3, torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

identify() {  # runs in the background; the script waits for it at the end
  local specs=("f16.f32 mma" "f16.f16 mma" "e4m3.f32 mma" "e5m2.f32 mma" "e4m3.f16 mma" "e5m2.f16 mma"
               "f16.f32 wgmma" "bf16.f32 wgmma" "e4m3.f32 wgmma" "e5m2.f32 wgmma" "e4m3.f16 wgmma" "e5m2.f16 wgmma")
  if [ -n "${IDENTIFY_PATHS:-}" ]; then  # e.g. "f64.f64:mma,bf16.f32:mma"
    IFS=',' read -r -a specs <<< "${IDENTIFY_PATHS//:/ }"
  fi
  mkdir -p "$OUT/identify"
  (
    for s in "${specs[@]}"; do
      set -- $s
      python3 -m tcsmt identify --gpu --path "$1" --instr "$2" --time-limit "$TL" --json "$OUT/identify/$1-$2.json" \
        > "$OUT/identify/$1-$2.txt" 2>&1 &
    done
    wait
    cp -r generated/identify-gpu-* "$OUT/identify/" 2>/dev/null
    tar czf "$OUT/identify.tgz" -C "$OUT" identify && rm -rf "$OUT/identify"
    log "identify finished"
  ) &
}

library_cublas() {  # PATHS: comma-separated cuBLAS path labels (default all four)
  python3 -m tcsmt.hwcheck.campaign --arch hopper --n "$N" --jobs "$JOBS" \
    --paths "${PATHS:-f16.f32/cublas,bf16.f32/cublas,f16.f16/cublas,tf32.f32/cublas}" \
    --extra hopper:block8 --extra hopper:chain_fp16 --extra hopper:block4 --extra hopper:no_floor \
    --out "$OUT/library_cublas.json" --dump "$OUT/library_cublas.npz" --dump-tiles 1
}

library_fp8() {
  python3 -m tcsmt.hwcheck.campaign --arch hopper --n "$N" --jobs "$JOBS" --no-layouts \
    --paths e4m3.f32/scaled_mm,e4m3.f32/scaled_mm_fast \
    --extra hopper:promote64 --extra hopper:promote256 --extra hopper:fast \
    --out "$OUT/library_fp8.json" --dump "$OUT/library_fp8.npz" --dump-tiles 1
}

k64() {  # every instruction path, 16-bit and fp8 inputs and fp64, at K = 64
  local paths
  paths=${K64_PATHS:-$(python3 -c "from tcsmt.hwcheck.paths import PATHS; print(','.join(p.label for p in PATHS.values() if not p.library))")}
  python3 -m tcsmt.hwcheck.campaign --arch hopper --n "$N" --k 64 --jobs "$JOBS" --no-layouts \
    --paths "$paths" --extra hopper:no_floor --out "$OUT/k64.json"
}

for stage in "$@"; do
  log "stage $stage"
  "$stage"
done
wait
log "done"
