#!/bin/bash
# One device call: record the attention, rotary, layout-variant, fp8 and settings families of
# evidence/library/recordings/README.md ("second campaign") on one GPU (argument: h100 or h200), probe what torch
# offers for deterministic matmuls, run the invariance witnesses (WITNESS: rows files), capture the LLaMA / fp8 programs
# of examples/model_replay.py (h100). Output under $OUT: <gpu>_recordings.tar (each recording compacted by
# recordings.py with its round-trip check, and the probe), <gpu>_capture.tar, <gpu>_witness_bits_<i>.json.gz.
# Environment: PROBE=0 skips the probe, SETTINGS names the settings recorded, BUDGET (s) skips what would start later.
# Run from a copy of the checkout's tools/, examples/ and tcsmt/ (the recorder needs numpy and torch only).
G=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/tools/device
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p /tmp/rec /tmp/cmp $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${PROBE:-1}" = 1 ]; then
  python3 $D/torch_settings_probe.py > /tmp/cmp/${G}_torch_probe.json 2> /tmp/cmp/${G}_torch_probe.err; echo "probe rc $?"
fi
i=0
for w in $WITNESS; do  # rows files: each run here, its bits in $OUT/<gpu>_witness_bits_<i>.json.gz
  python3 $D/invariance_witnesses.py run $ROOT/$w /tmp/${G}_witness_bits_$i.json 2>&1 | tail -12
  gzip -c /tmp/${G}_witness_bits_$i.json > $OUT/${G}_witness_bits_$i.json.gz
  i=$((i + 1))
done
R="python3 $D/record_plans.py run --out /tmp/rec --workers 14 --heavy-slots 2"
run() {
  name=$1; shift
  if [ $(( $(date +%s) - T0 )) -gt ${BUDGET:-380} ]; then echo "== $name skipped (time)"; return; fi
  echo "== $name $(( $(date +%s) - T0 )) s"; $R --name ${G}_$name "$@" 2>&1 | tail -4
  (python3 $D/recordings.py compact /tmp/rec/${G}_$name.json.gz /tmp/cmp/${G}_$name.json.gz 2>&1 | tail -1) &
}
run attn_families --deadline 120 --list attnfam:bf16,fp16:1-4096:all
run rope --deadline 45 --list rope:all
run layout_variants --deadline 60 --list views:bf16,fp16:1-4096
run layers_fp8_more --deadline 90 --list layers:e4m3_bf16_fast,e4m3_f32:fwd,dgrad,wgrad:1-1024+8x
for s in ${SETTINGS:-ws4096_8 deterministic bi_env}; do
  run layers_bf16_$s --deadline 60 --setting $s --list layers:bf16:fwd,dgrad,wgrad:1-1024+8x
done
echo "== recorded $(( $(date +%s) - T0 )) s"
if [ "$G" = h100 ] && [ "${CAPTURE:-1}" = 1 ]; then
  (cd /tmp && PYTHONPATH=$ROOT python3 $ROOT/examples/model_replay.py capture --out /tmp/cap 2>&1 | tail -25)
  tar -C /tmp -cf $OUT/${G}_capture.tar cap
fi
echo "== captured $(( $(date +%s) - T0 )) s"
wait
tar -C /tmp -cf $OUT/${G}_recordings.tar cmp
ls -la $OUT /tmp/cmp
echo "== done $(( $(date +%s) - T0 )) s"
