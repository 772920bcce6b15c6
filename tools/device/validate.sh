# Validation and random shapes on one GPU: bash validate.sh TAG (outputs under $OUT)
D=$(dirname "$0"); G=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 $D/record_plans.py autograd --out $OUT/${G}_autograd.json > $OUT/${G}_autograd_log.txt 2>&1
python3 $D/record_plans.py run --out $OUT --name ${G}_grid_capture --list file:$D/grid_calls.json.gz --workers 14 --deadline 120
python3 $D/record_plans.py run --out $OUT --name ${G}_fresh_compare --list fresh:7:600 --compare-exec --workers 3 --deadline 100
python3 $D/record_plans.py run --out $OUT --name ${G}_random --list random:11:8192 --workers 14 --deadline 120
