#!/bin/bash
# Usage on the device: OUT=DIR bash tools/device/library_plans_h200.sh 2>&1 | tee $OUT/log.txt (numpy and torch only).
# H200 run (evidence/library_plans.md, "H200"): validation (CPU-bound input generation) and grid + heuristic (no probes),
# as two processes side by side; each has its own profiler session and cuBLASLt logger.
set -o pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."   # the repository root
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
echo "== start $(date -u)"
( timeout 290 python3 tools/device/library_plans.py --out $OUT/v --stages info,valid > $OUT/v_stdout.txt 2>&1; echo "rc valid $? $(date -u)" ) &
( timeout 290 python3 tools/device/library_plans.py --out $OUT/g --stages info,grid,heur > $OUT/g_stdout.txt 2>&1; echo "rc grid $? $(date -u)" ) &
wait
rm -f $OUT/v/probes.json $OUT/v/h100_cublas_plans.json.gz $OUT/g/probes.json
[ -f $OUT/g/h100_cublas_plans.json.gz ] && rm -f $OUT/g/grid_raw.json.gz
tail -n 5 $OUT/v_stdout.txt $OUT/g_stdout.txt   # (the run itself had "tail -5", which this tail refused)
ls -la $OUT $OUT/v $OUT/g
echo "== end $(date -u)"
