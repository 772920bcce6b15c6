# The 11 tasks of h100_layers_other_dtypes that failed (9 capture failures after an out-of-memory, 2 past the deadline)
D=$(dirname "$0"); L=1-1024+8x
python3 $D/record_plans.py run --out $OUT --name h100_layers_other_dtypes_rerun --list layers:bf16f32,tf32:fwd,dgrad,wgrad:$L --list layers:e4m3_bf16,e4m3_f32_fast,e4m3_bf16_row,e4m3e5m2_bf16:fwd,dgrad,wgrad:$L --only-tasks 236,257,259,263,264,354,390,391,392,825,833 --workers 11 --heavy-slots 1 --deadline 200 --grace 30
