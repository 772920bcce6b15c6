#!/usr/bin/env bash
# On a GPU: separating inputs for two plans of one library call (tcsmt discriminate --library,
# on any machine), run through torch on the GPU (tcsmt hwcheck --library-inputs), and two random-input library
# checks (tcsmt hwcheck --library).  Results: evidence/h100_library_plan_checks.json (H100 run of
# helper "replay"; there the inputs were made first on a CPU machine and carried over, as STAGE=gpu does).
#   bash tools/device/library_plan_checks.sh [inputs|gpu|all]      (OUT: result folder, default /tmp/out)
set -u
OUT=${OUT:-/tmp/out}; IN=${IN:-$OUT/inputs}; mkdir -p "$OUT" "$IN"
STAGE=${1:-all}
if [ "$STAGE" != gpu ]; then
  tcsmt discriminate --library mm:64x64x4096:bfloat16 --plan-b split_k=4 --output "$IN/s3_vs_s4_bf16.json" --force
  tcsmt discriminate --library mm:64x64x4096:bfloat16:out=float32 --plan-b split_k=4 --output "$IN/s3_vs_s4_f32.json" --force
  tcsmt discriminate --library mm:64x64x4096:bfloat16 --plan-b reduce=out_rounded --output "$IN/fp32_vs_bf16_partials.json" --force
  tcsmt discriminate --library scaled_mm:256x256x512:float8_e4m3fn:scale=tensor,out=float32 --plan-a promote=128 \
      --plan-b promote=256 --output "$IN/promote128_vs_256.json" --force
fi
if [ "$STAGE" != inputs ]; then
  for f in s3_vs_s4_bf16 s3_vs_s4_f32 fp32_vs_bf16_partials promote128_vs_256; do
    tcsmt hwcheck --library-inputs "$IN/$f.json" --save "$OUT/$f.result.json" --force; echo "rc=$?"
  done
  tcsmt hwcheck --library mm:64x64x4096:bfloat16 --plan split_k=4 --seed 5 --samples 128 \
      --save "$OUT/random_s3_s4.result.json" --force; echo "rc=$?"
  tcsmt hwcheck --library mm:100x300x1000:float16:out=float32 --plan k_tile=0 --library-dist cancel --seed 7 \
      --samples 128 --save "$OUT/random_ktile.result.json" --force; echo "rc=$?"
fi
