#!/usr/bin/env bash
# The A/B of conv_ranks_ab_2026-12-07_b06cb13_zen5.txt: two nostrum-train binaries, alternating, on
# the demo's job at 2 ranks, each run measuring the conv table (--conv-kernel measure) and writing
# result.json; judge with conv_ranks_ab_judge.py.
# usage: ROOT=old/nostrum-train POOLED=new/nostrum-train DATA=data/fashion-mnist OUT=dir \
#          conv_ranks_ab.sh ROUNDS BATCH TAG   (run from the repository root)
set -euo pipefail
mkdir -p "$OUT"
for i in $(seq 1 "$1"); do
  for arm in root pooled; do
    bin=$ROOT; [ "$arm" = pooled ] && bin=$POOLED
    tools/mpirun -n 2 "$bin" --config jobs/fashion_mnist_resnet8.ini --data "$DATA" \
      --batch-size "$2" --conv-kernel measure --conv-cache none --max-steps 1 \
      --result-json "$OUT/$3_${arm}_$i.json" > /dev/null 2>&1 || true  # exit 2: the step budget
  done
done
