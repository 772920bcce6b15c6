# Other dtypes, settings, attention and addmm/matmul shapes at a subset of token counts: bash more.sh TAG HEAVY_SLOTS
D=$(dirname "$0"); G=$1; H=$2; L=1-1024+8x
python3 $D/record_plans.py run --out $OUT --name ${G}_layers_other_dtypes --list layers:bf16f32,tf32:fwd,dgrad,wgrad:$L --list layers:e4m3_bf16,e4m3_f32_fast,e4m3_bf16_row,e4m3e5m2_bf16:fwd,dgrad,wgrad:$L --workers 14 --heavy-slots $H --deadline 170 --grace 20
for S in cublaslt nosplitk_lt nosplitk ws16_8 ws0 ltws1m; do
  python3 $D/record_plans.py run --out $OUT --name ${G}_layers_bf16_$S --setting $S --list layers:bf16:fwd,dgrad,wgrad:$L --workers 14 --heavy-slots $H --deadline 35 --grace 15
done
python3 $D/record_plans.py run --out $OUT --name ${G}_attn_extra --list attn:bf16,fp16:1-256+16x4096 --list extra:bf16:$L --workers 14 --heavy-slots $H --deadline 60 --grace 15
