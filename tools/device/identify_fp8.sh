#!/usr/bin/env bash
# tcsmt identify --gpu on the four fp8 mma.sync paths of the H100, in parallel
# (evidence/identify_h100_{e4m3,e5m2}_{f32,f16}_mma.json, logs under generated/).
#
#   bash identify_fp8.sh             (from a folder holding stage/tcsmt: the package tcsmt/ with
#                                     models/, queries/ inside it, and whl/: the pysmt and bitwuzla
#                                     wheels for the device's Python 3.12; results under $OUT)
# Environment: TL (seconds per path, default 360), SOLVER (default portfolio: every query stage in its
# own process, the full one with bitwuzla and its local search side by side), FP8_PATHS (default the
# four; the third e4m3 -> fp16 run of 2026-11-25 was FP8_PATHS=e4m3.f16 TL=330, alone on the 16 cores).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/tcsmt-out}
TL=${TL:-360}
SOLVER=${SOLVER:-portfolio}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/stage PYTHONUNBUFFERED=1
python3 -c "import pysmt.shortcuts, bitwuzla, cupy, tcsmt; print('tcsmt', tcsmt.__file__, 'cupy', cupy.__version__)" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
mkdir -p "$OUT/id"
for s in ${FP8_PATHS:-e4m3.f32 e5m2.f32 e4m3.f16 e5m2.f16}; do
  python3 -m tcsmt identify --gpu --path "$s" --instr mma --time-limit "$TL" --solver "$SOLVER" --progress \
    --json "$OUT/identify_h100_${s/./_}_mma.json" --log-dir "$OUT/id/log-$s" > "$OUT/id/$s.txt" 2>&1 &
done
wait
tail -n 40 "$OUT"/id/*.txt
tar czf "$OUT/identify_logs.tgz" -C "$OUT" id && rm -rf "$OUT/id"
