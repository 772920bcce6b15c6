#!/bin/bash
# One device call: record again, with the recorder that keeps each segment_k_on launch's words (plan field
# segment_k_launch), the recorded families whose tf32 calls run cuBLAS's segment_k_on kernels -- the model layers'
# tf32 products (list layers:tf32:fwd,dgrad,wgrad:1-1024+8x, as in <gpu>_layers_other_dtypes) and the random shapes
# (random:11:8192, as in <gpu>_random) -- on one GPU (argument: h100 or h200); then run the segment-K GPU check
# (segment_k_samples.py on segment_k_sample_list.json). Output under $OUT: <gpu>_layers_tf32_launch.json.gz,
# <gpu>_random_launch.json.gz, <gpu>_layers_tf32_launch_rerun.json.gz (the layer tasks not done in the first run, again
# at 4 workers; compacted by recordings.py with its round-trip check), <gpu>_segment_k_samples.json.gz.
# RERUN_ONLY=IDS: only the rerun of those layer tasks (and the GPU check).
G=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/tools/device
export PYTHONUNBUFFERED=1
mkdir -p /tmp/rec $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R="python3 $D/record_plans.py run --out /tmp/rec --workers 14 --heavy-slots 2"
LAYERS=layers:tf32:fwd,dgrad,wgrad:1-1024+8x
if [ -z "$RERUN_ONLY" ]; then
  $R --name ${G}_layers_tf32_launch --deadline 150 --grace 20 --list $LAYERS 2>&1 | tail -3
  $R --name ${G}_random_launch --deadline 90 --grace 20 --list random:11:8192 2>&1 | tail -3
  RERUN_ONLY=$(python3 $D/record_plans.py rerun-ids /tmp/rec/${G}_layers_tf32_launch.json.gz)
  NAMES="layers_tf32_launch random_launch"
fi
# the heavy layers' tasks that ran out of device memory beside 13 other workers (whole, or in some calls) or did not
# start: again, 4 at a time
if [ -n "$RERUN_ONLY" ]; then
  python3 $D/record_plans.py run --out /tmp/rec --workers 4 --heavy-slots 1 --name ${G}_layers_tf32_launch_rerun \
    --deadline 300 --grace 30 --list $LAYERS --only-tasks $RERUN_ONLY 2>&1 | tail -3
  NAMES="$NAMES layers_tf32_launch_rerun"
fi
for n in $NAMES; do
  python3 $D/recordings.py compact /tmp/rec/${G}_$n.json.gz $OUT/${G}_$n.json.gz 2>&1 | tail -1
done
(cd $ROOT && PYTHONPATH=$ROOT python3 $D/segment_k_samples.py $D/segment_k_sample_list.json $OUT/${G}_segment_k_samples.json.gz 200 2>&1 | tail -2)
ls -la $OUT
