#!/bin/bash
# One device call: record again, with the recorder that keeps each segment_k_on launch's words (plan field
# segment_k_launch), the recorded families whose tf32 calls run cuBLAS's segment_k_on kernels -- the model layers'
# tf32 products (list layers:tf32:fwd,dgrad,wgrad:1-1024+8x, as in <gpu>_layers_other_dtypes) and the random shapes
# (random:11:8192, as in <gpu>_random) -- on one GPU (argument: h100 or h200); then run the segment-K GPU check
# (segment_k_samples.py on segment_k_sample_list.json). Output under $OUT: <gpu>_layers_tf32_launch.json.gz,
# <gpu>_random_launch.json.gz (compacted by recordings.py with its round-trip check), <gpu>_segment_k_samples.json.gz.
G=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/tools/device
export PYTHONUNBUFFERED=1
mkdir -p /tmp/rec $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R="python3 $D/record_plans.py run --out /tmp/rec --workers 14 --heavy-slots 2"
$R --name ${G}_layers_tf32_launch --deadline 150 --grace 20 --list layers:tf32:fwd,dgrad,wgrad:1-1024+8x 2>&1 | tail -3
$R --name ${G}_random_launch --deadline 90 --grace 20 --list random:11:8192 2>&1 | tail -3
for n in layers_tf32_launch random_launch; do
  python3 $D/recordings.py compact /tmp/rec/${G}_$n.json.gz $OUT/${G}_$n.json.gz 2>&1 | tail -1
done
(cd $ROOT && PYTHONPATH=$ROOT python3 $D/segment_k_samples.py $D/segment_k_sample_list.json $OUT/${G}_segment_k_samples.json.gz 200 2>&1 | tail -2)
ls -la $OUT
