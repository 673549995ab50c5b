#!/usr/bin/env bash
# nostrum's own convolution kernels against oneDNN's, pass by pass: nostrum-conv-bench --onednn on
# every ResNet-50 conv (224, batch 32 unless ARGS says otherwise) in fp32 and bf16 at 1 and 2
# threads, each conv's two kernels timed back to back (same load), then the per-pass step ratios.
# usage: tools/bench/onednn_vs_nostrum.sh [BUILD_DIR] > results/FILE.txt
set -euo pipefail
build=${1:-build}
bench=$build/tools/bench/nostrum-conv-bench
args=${ARGS:---model resnet50 --image 224 --batch 32 --repeats 5 --no-ceiling}
echo "# CPU: $(lscpu | awk -F: '/Vendor ID|CPU family|^Model:|Model name/ {gsub(/^ +/, "", $2); printf "%s; ", $2}')"
echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)"
echo "# command: $0 $build (ARGS=\"$args\"), per config: OMP_NUM_THREADS=T $bench $args --precision P --onednn"
for threads in ${THREADS:-1 2}; do
  for precision in ${PRECISIONS:-fp32 bf16}; do
    echo "## threads $threads precision $precision (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
    OMP_NUM_THREADS=$threads "$bench" $args --precision "$precision" --onednn | grep -v '^{"conv"'
  done
done
