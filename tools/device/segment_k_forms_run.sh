#!/bin/bash
# One device call (arguments: h100 or h200, and forms or tails): the launch words and the swamping probes of the calls
# of tools/device/segment_k_<forms|tails>_list.json (python -m tools.library.segment_k_form_list [--tails 8]: calls of
# every recorded tf32 segment_k_on launch form, or of every recorded way the split tiles end in narrower last panels):
# $OUT/<gpu>_segment_k_params_<name>.json.gz (segment_k_params.py) and $OUT/<gpu>_segment_k_probes_<name>.json.gz
# (segment_k_probe.py), each call captured and probed on this GPU, judged offline (tests/test_segment_k_rule.py).
G=$1
NAME=${2:-forms}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/tools/device
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd $ROOT
python3 $D/segment_k_params.py $D/segment_k_${NAME}_list.json $OUT/${G}_segment_k_params_${NAME}.json.gz 200 2>&1 | tail -2
python3 $D/segment_k_probe.py $D/segment_k_${NAME}_list.json $OUT/${G}_segment_k_probes_${NAME}.json.gz 300 2>&1 | tail -2
ls -la $OUT
