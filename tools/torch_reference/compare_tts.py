#!/usr/bin/python3
"""Time-to-solution of the embedded default, nostrum against PyTorch, in one invocation on the same
machine and cores: nostrum-train with `mpirun -n RANKS` (1 thread per rank) and the PyTorch peer
(train_fashion_mnist.py, RANKS threads, same model, recipe, global batch and target), alternating who
runs first. Training is stochastic and the target is reached after a whole number of epochs, so one
seed can land either side of an epoch boundary: --seeds runs both frameworks once per seed and scores
each as MLPerf does (the olympic mean: drop the fastest and the slowest run, average the rest; the
plain mean below 3 runs). Prints one line per run, the scores and their ratio.

usage: /usr/bin/python3 tools/torch_reference/compare_tts.py [--seeds 1,2,3,4,5] [--ranks 2]
       [--job JOB.ini] [--torch-format channels_last|nchw]
(after tools/build and `nostrum-shards fashion-mnist -o data/fashion-mnist`)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "mlperf"))
from score import olympic_average  # noqa: E402


def run_nostrum(args, seed, work):
    result = os.path.join(work, "nostrum.json")
    cmd = [os.path.join(ROOT, "tools", "mpirun"), "-n", str(args.ranks),
           os.path.join(args.build, "src", "train", "nostrum-train"), "--config", args.job,
           "--data", args.data, "--threads", "1", "--seed", str(seed), "--quiet",
           "--result-json", result]
    subprocess.run(cmd, check=False)
    return json.load(open(result))


def run_torch(args, seed, work):
    result = os.path.join(work, "torch.json")
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "tools", "torch_reference", "train_fashion_mnist.py"),
           "--job", args.job, "--ranks", str(args.ranks), "--threads", str(args.ranks),
           "--format", args.torch_format, "--seed", str(seed), "--json", result]
    subprocess.run(cmd, check=False)
    return json.load(open(result))


def score(results):
    """MLPerf's score of these runs: a run that missed the target counts as infinitely slow."""
    times = [r["time_to_solution_s"] if r["status"] == "success" else float("inf") for r in results]
    if len(times) >= 3:
        return olympic_average(times)
    return None if any(t == float("inf") for t in times) else statistics.mean(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1", help="comma-separated seeds, one run of each framework per seed")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--job", default=os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.ini"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-format", choices=["nchw", "channels_last"], default="channels_last",
                    help="the PyTorch peer's memory format (channels_last: its faster one here)")
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds: '{args.seeds}' is not a comma-separated list of integers")
    runs = {"nostrum": [], "pytorch": []}
    with tempfile.TemporaryDirectory() as work:
        for i, seed in enumerate(seeds):
            order = [("nostrum", run_nostrum), ("pytorch", run_torch)]
            if i % 2:
                order.reverse()
            for name, fn in order:
                res = fn(args, seed, work)
                runs[name].append(res)
                print(f"seed {seed} {name:8s} status {res['status']:8s} time-to-solution "
                      f"{res['time_to_solution_s']:7.1f} s  epochs {res['epochs']}  accuracy "
                      f"{res['final_accuracy']:.4f}  {res['images_per_second']:.0f} images/s", flush=True)
    scores = {k: score(v) for k, v in runs.items()}
    ips = {k: statistics.median(r["images_per_second"] for r in v) for k, v in runs.items()}
    epochs = {k: statistics.mean(r["epochs"] for r in v) for k, v in runs.items()}
    kind = "olympic mean" if len(seeds) >= 3 else "mean"
    if None in scores.values():
        print(f"{kind} time-to-solution: not scored, a run missed the target "
              f"(nostrum {scores['nostrum']}, pytorch {scores['pytorch']})")
        return 2
    print(f"{kind} time-to-solution over {len(seeds)} seed(s): nostrum {scores['nostrum']:.1f} s "
          f"({epochs['nostrum']:.2f} epochs on average), pytorch {scores['pytorch']:.1f} s "
          f"({epochs['pytorch']:.2f}); nostrum / pytorch = {scores['nostrum'] / scores['pytorch']:.2f}; "
          f"training images/s ratio {ips['nostrum'] / ips['pytorch']:.2f} (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
