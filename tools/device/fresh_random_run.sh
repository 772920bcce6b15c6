#!/usr/bin/env bash
# Fresh random-shape calls on one GPU (argument: h100 or h200; results under $OUT): record every call of
# tools/device/fresh_random_list.json with `tcsmt record --calls` (the user's command), run its sampled calls for
# their output bits (catalog_sample_run.py), and make 40 of them through the torch facade recording on the spot
# (record_missing_check.py); then the GPU tests of the on-the-spot recorder.  On the CPU afterwards:
#   python -m tools.library.fresh_random coverage tools/device/fresh_random_list.json --gpu G --plans PLANS
#   python -m tools.library.catalog_samples replay G_fresh_random_samples.json.gz --gpu G --plans PLANS
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
G=$1
OUT=${OUT:-/tmp/tcsmt-out}
L=tools/device/fresh_random_list.json
python3 -c "import json; print('\n'.join(json.load(open('$L'))['all_calls']))" > /tmp/fresh_calls.txt
mkdir -p "$OUT/plans"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
python3 -m tcsmt.cli.record_cmd --calls /tmp/fresh_calls.txt --out "$OUT/plans" --name fresh_random 2>&1 | tail -40
echo "recorded in $(( $(date +%s) - T0 )) s"
python3 tools/device/catalog_sample_run.py $L "$OUT/${G}_fresh_random_samples.json.gz" 200 2>&1 | tail -3
rm -rf /tmp/spot
python3 tools/device/record_missing_check.py $L /tmp/spot "$OUT/${G}_record_missing_check.json" 40 150 2>&1 | tail -4
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_record_missing.py tests/test_record.py 2>&1 | tail -3
