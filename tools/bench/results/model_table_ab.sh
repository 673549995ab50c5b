#!/bin/bash
# Interleaved A/B of nostrum-bench: base (0287042) vs new (model-table), same threads, alternating order.
BASE=/tmp/base-build/tools/bench/nostrum-bench
NEW=/work/wt-model-table/build/tools/bench/nostrum-bench
ROUNDS=${ROUNDS:-3}
declare -A ARGS=(
  [1]="--model resnet50 --image 224x224x3 --batch 32 --steps 3"
  [2]="--model resnet8 --image 28x28x1 --batch 128 --steps 10"
  [3]="--model resnet50 --image 64x64x3 --batch 64 --steps 5"
)
run() { # label case
  local bin=$BASE; [ "$1" = new ] && bin=$NEW
  local out
  out=$(env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=2 $bin ${ARGS[$2]} --threads 2)
  echo "round $r case $2 $1 $(echo "$out" | grep -o '"images_per_second": *[0-9.]*' | grep -o '[0-9.]*$') load $(cut -d' ' -f1 /proc/loadavg) $(echo "$out" | grep -o '"openblas_core": *"[^"]*"')"
}
for r in $(seq 1 $ROUNDS); do
  for c in ${CASES:-2 3 1}; do
    if [ $((r % 2)) = 1 ]; then run base $c; run new $c; else run new $c; run base $c; fi
  done
done
