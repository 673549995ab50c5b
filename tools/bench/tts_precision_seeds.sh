#!/usr/bin/env bash
# Time-to-solution of the demo recipe in fp32 and bf16 over seeds 1-5 (interleaved per seed, 2 ranks x
# 1 thread), then MLPerf-style olympic means of the time and the epochs. A benchmark, not a test.
# Usage: tools/bench/tts_precision_seeds.sh [OUT_DIR]   (needs data/fashion-mnist: tools/demo makes it)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/tts-precision}
mkdir -p "$out"
for seed in 1 2 3 4 5; do
  for prec in fp32 bf16; do
    tools/mpirun -n 2 build/src/train/nostrum-train --config jobs/fashion_mnist_resnet8.ini \
      --data data/fashion-mnist --seed "$seed" --precision "$prec" --quiet \
      --result-json "$out/$prec-$seed.json" > "$out/$prec-$seed.log" 2>&1 || true
    echo "$prec seed $seed done $(date +%H:%M:%S)"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def olympic(v):
    v = sorted(v)
    return sum(v[1:-1]) / len(v[1:-1])
for p in ("fp32", "bf16"):
    r = [json.load(open(f"{out}/{p}-{s}.json")) for s in range(1, 6)]
    print(p, "tts", [round(x["time_to_solution_s"], 1) for x in r], "epochs", [x["epochs"] for x in r],
          "acc", [round(x["final_accuracy"], 4) for x in r], "status", [x["status"] for x in r])
    print(p, "olympic mean tts %.1f s, epochs %.2f" % (olympic([x["time_to_solution_s"] for x in r]),
                                                       olympic([x["epochs"] for x in r])))
PY
