#!/bin/bash
# Usage on the device: OUT=DIR bash tools/device/layout_addmm.sh PROBE_LIST ADDMM_LIST ADDMM_LT_LIST [BUDGET_S]
# (numpy and torch only).  The fresh layout probes of the refined split-K slice rule (tools/library/layout_fresh.py)
# and the sampled addmm outputs with beta = 1 (tools/library/addmm_samples.py) in one device call: one process runs
# the addmm calls of ADDMM_LIST (library_plans.py --valid-list), a second the probes of PROBE_LIST for at most
# BUDGET_S seconds (default 220), a third, whose torch prefers cuBLASLt, the addmm calls of ADDMM_LT_LIST.
# Writes $OUT/smi.txt, $OUT/info.json, $OUT/stdout.txt, $OUT/r/{probe_list,valid_list}.json.gz, $OUT/r/log.txt,
# $OUT/lt/valid_list.json.gz, $OUT/lt/log.txt.
set -o pipefail
export PYTHONUNBUFFERED=1
PROBES=$1; ADDMM=$2; ADDMM_LT=$3
BUDGET=${4:-220}
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/smi.txt" 2>&1; cat "$OUT/smi.txt"
python3 - > "$OUT/info.json" <<'PY'
import json
import sys

sys.path.insert(0, "tools/device")
import library_plans as L
import torch

torch.mm(torch.ones(2, 2, device="cuda"), torch.ones(2, 2, device="cuda"))  # loads cuBLAS
print(json.dumps(L.info(torch)))
PY
echo "== start $(date -u)"
timeout 150 python3 tools/device/library_plans.py --out "$OUT/r" --valid-list "$ADDMM" > "$OUT/stdout.txt" 2>&1
echo "rc addmm $? $(date -u)"
timeout $((BUDGET + 150)) python3 tools/device/library_plans.py --out "$OUT/r" --probe-list "$PROBES" \
    --probe-budget "$BUDGET" >> "$OUT/stdout.txt" 2>&1; echo "rc probes $? $(date -u)"
timeout 120 python3 - "$OUT/lt" "$ADDMM_LT" >> "$OUT/stdout.txt" 2>&1 <<'PY'
import runpy
import sys

import torch

torch.backends.cuda.preferred_blas_library("cublaslt")
out, calls = sys.argv[1], sys.argv[2]
sys.argv = ["library_plans.py", "--out", out, "--valid-list", calls]
runpy.run_path("tools/device/library_plans.py", run_name="__main__")
PY
echo "rc lt $? $(date -u)"
gzip -f "$OUT"/r/*.json "$OUT"/lt/*.json
tail -n 30 "$OUT/stdout.txt"
ls -la "$OUT/r" "$OUT/lt"
