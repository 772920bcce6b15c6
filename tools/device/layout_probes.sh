#!/bin/bash
# Usage on the device: OUT=DIR bash tools/device/layout_probes.sh LIST [BUDGET_S] (numpy and torch only).
# Split-K probes of the operand layouts the plan grid did not probe (evidence/library_plans.md, "Layouts"): the
# list that `python -m tools.library.layout_probes lists DIR` wrote for this GPU, probed in its order by
# library_plans.py --probe-list (slice_probe, reduce_probe2) for at most BUDGET_S seconds (default 240).
# Writes $OUT/r/probe_list.json, $OUT/r/log.txt, $OUT/stdout.txt, $OUT/info.json (versions, matmul settings) and
# $OUT/smi.txt (driver version).
set -o pipefail
export PYTHONUNBUFFERED=1
LIST=$1
BUDGET=${2:-240}
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
timeout $((BUDGET + 150)) python3 tools/device/library_plans.py --out "$OUT/r" --probe-list "$LIST" \
    --probe-budget "$BUDGET" > "$OUT/stdout.txt" 2>&1; echo "rc $? $(date -u)"
tail -n 40 "$OUT/stdout.txt"
ls -la "$OUT/r"
