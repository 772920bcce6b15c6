#!/bin/bash
# Usage on the device: OUT=DIR bash tools/device/library_h200_confirm.sh LISTS_DIR (numpy and torch only).
# H200 run (evidence/h200_library_confirm.json): the validation calls and split-K probes that `python -m
# tools.library.h200_confirm lists LISTS_DIR` picked among the calls whose H200 plan differs from the H100's.
# Writes $OUT/r/valid_list.json, $OUT/r/probe_list.json, $OUT/r/log.txt and $OUT/smi.txt (driver version).
set -o pipefail
export PYTHONUNBUFFERED=1
LISTS=$1
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/smi.txt 2>&1; cat $OUT/smi.txt
echo "== start $(date -u)"
timeout 280 python3 tools/device/library_plans.py --out $OUT/r --valid-list $LISTS/valid_list.json \
    --probe-list $LISTS/probe_list.json > $OUT/stdout.txt 2>&1; echo "rc $? $(date -u)"
tail -n 30 $OUT/stdout.txt
ls -la $OUT/r
