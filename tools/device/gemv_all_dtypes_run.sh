#!/usr/bin/env bash
# GEMV probes of every kernel and block the GPU's order table holds nothing of (argument: h100 or h200; results under
# $OUT): the calls of tools/device/<gpu>_gemv_probes_all_dtypes_list.json (`python -m tools.library.gemv_probe_lists
# --spread 8 --unread-only` over the GPU's recordings, fresh random ones left out), run with the recorded call's output
# dtype and tf32 setting; then fresh output samples of the fresh random calls the recordings refused
# (tools/device/<gpu>_fresh_refused_list.json, `python -m tools.library.fresh_random refused --reason .`), taken
# before any order read from these probes, to check the orders on calls held out from them.  On the CPU afterwards:
#   python -m tools.library.gemv_orders evidence/library/<gpu>_gemv_probes*.json.gz --gpu <gpu> ...
#   python -m tools.library.catalog_samples replay <gpu>_fresh_refused_samples.json.gz --gpu <gpu> --plans PLANS
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
G=$1
OUT=${OUT:-/tmp/tcsmt-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 tools/device/gemv_probes.py tools/device/${G}_gemv_probes_all_dtypes_list.json \
  "$OUT/${G}_gemv_probes_all_dtypes.json.gz" ${PROBE_SECONDS:-330} 2>&1 | tail -5
python3 tools/device/catalog_sample_run.py tools/device/${G}_fresh_refused_list.json \
  "$OUT/${G}_fresh_refused_samples.json.gz" ${SAMPLE_SECONDS:-200} 2>&1 | tail -3
