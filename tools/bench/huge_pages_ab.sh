#!/usr/bin/env bash
# nostrum with and without huge pages (NOSTRUM_HUGE_PAGES=1 / 0), interleaved in rounds, on the
# issue's three cases in fp32 and bf16, 2 threads, the cached conv table (measured by the first
# run of each). Prints one line per run: round, case, precision, setting, images/s, peak RSS MB,
# huge-page MB; then the median ratio per case and precision.
# Usage: tools/bench/huge_pages_ab.sh [build] [rounds]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-3}
bench="$build/tools/bench/nostrum-bench"
cases=("resnet50 224x224x3 32 4" "resnet50 64x64x3 64 10" "resnet8 28x28x1 128 30")
out=$(mktemp)
for c in "${cases[@]}"; do  # measure the tables first, outside the rounds
  set -- $c
  for p in fp32 bf16; do
    OMP_NUM_THREADS=2 "$bench" --model "$1" --image "$2" --batch "$3" --threads 2 --steps 1 \
      --warmup 0 --precision "$p" >/dev/null
  done
done
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    set -- $c
    for p in fp32 bf16; do
      order="0 1"
      [ $((r % 2)) -eq 0 ] && order="1 0"
      for h in $order; do
        line=$(NOSTRUM_HUGE_PAGES=$h OMP_NUM_THREADS=2 "$bench" --model "$1" --image "$2" \
          --batch "$3" --threads 2 --steps "$4" --warmup 2 --precision "$p" | tail -1)
        echo "$line" | /usr/bin/python3 -c "
import json, sys
d = json.loads(sys.stdin.read())
print('$r', '$1 $2 b$3', '$p', 'huge=$h', d['images_per_second'], d['peak_rss_mb'],
      d['anon_huge_pages_mb'])" | tee -a "$out"
      done
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, model, image, batch, p, h, ips, rss, huge = line.split()
    runs.setdefault((f"{model} {image} {batch}", p), {}).setdefault(h, []).append(
        (float(ips), float(rss)))
print("| case | precision | images/s, 4 KiB pages | images/s, huge pages | ratio (medians) | peak RSS MB 4 KiB / huge |")
print("|---|---|---|---|---|---|")
for (case, p), by in runs.items():
    off = statistics.median(x for x, _ in by["huge=0"])
    on = statistics.median(x for x, _ in by["huge=1"])
    print(f"| {case} | {p} | {off:.2f} | {on:.2f} | {on / off:.3f} | "
          f"{max(r for _, r in by['huge=0']):.0f} / {max(r for _, r in by['huge=1']):.0f} |")
PY
rm -f "$out"
