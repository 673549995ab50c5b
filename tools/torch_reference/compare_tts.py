#!/usr/bin/python3
"""Time-to-solution of the embedded default, nostrum against PyTorch, in one invocation on the same
machine and cores: nostrum-train with `mpirun -n RANKS` (1 thread per rank) and the PyTorch peer
(train_fashion_mnist.py, RANKS threads, same model, recipe, global batch and target), alternating who
runs first over --rounds rounds. Prints one line per run and the ratio of the medians.

usage: /usr/bin/python3 tools/torch_reference/compare_tts.py [--rounds 1] [--ranks 2] [--job JOB.ini]
       [--torch-format channels_last|nchw]
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


def run_nostrum(args, work):
    result = os.path.join(work, "nostrum.json")
    cmd = [os.path.join(ROOT, "tools", "mpirun"), "-n", str(args.ranks),
           os.path.join(args.build, "src", "train", "nostrum-train"), "--config", args.job,
           "--data", args.data, "--threads", "1", "--quiet", "--result-json", result]
    subprocess.run(cmd, check=False)
    return json.load(open(result))


def run_torch(args, work):
    result = os.path.join(work, "torch.json")
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "tools", "torch_reference", "train_fashion_mnist.py"),
           "--job", args.job, "--ranks", str(args.ranks), "--threads", str(args.ranks), "--format", args.torch_format,
           "--json", result]
    subprocess.run(cmd, check=False)
    return json.load(open(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--job", default=os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.ini"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fashion-mnist"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-format", choices=["nchw", "channels_last"], default="channels_last",
                    help="the PyTorch peer's memory format (channels_last: its faster one here)")
    args = ap.parse_args()
    runs = {"nostrum": [], "pytorch": []}
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            order = [("nostrum", run_nostrum), ("pytorch", run_torch)]
            if r % 2:
                order.reverse()
            for name, fn in order:
                res = fn(args, work)
                runs[name].append(res)
                print(f"round {r + 1} {name:8s} status {res['status']:8s} time-to-solution "
                      f"{res['time_to_solution_s']:7.1f} s  epochs {res['epochs']}  accuracy "
                      f"{res['final_accuracy']:.4f}  {res['images_per_second']:.0f} images/s", flush=True)
    ok = all(r["status"] == "success" for rs in runs.values() for r in rs)
    tts = {k: statistics.median(r["time_to_solution_s"] for r in v) for k, v in runs.items()}
    ips = {k: statistics.median(r["images_per_second"] for r in v) for k, v in runs.items()}
    print(f"median time-to-solution: nostrum {tts['nostrum']:.1f} s, pytorch {tts['pytorch']:.1f} s, "
          f"nostrum / pytorch = {tts['nostrum'] / tts['pytorch']:.2f}; training images/s ratio "
          f"{ips['nostrum'] / ips['pytorch']:.2f}" + ("" if ok else "  (a run missed the target)"))
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
