# Every token count 1..16384 of the model layers' three training products, bf16 and fp16: bash main.sh TAG HEAVY_SLOTS
D=$(dirname "$0"); G=$1; H=$2
python3 $D/record_plans.py run --out $OUT --name ${G}_layers_16bit --list layers:bf16,fp16:fwd,dgrad,wgrad:all --workers 14 --heavy-slots $H --deadline 500 --grace 40 --flush-every 60
