#!/usr/bin/python3
"""Every distinct ResNet-50 conv (forward, backward-data, backward-weights), nostrum against PyTorch,
interleaved conv by conv in one invocation, with the SGEMM ceiling measured before and after.

Usage: tools/bench/compare_convs.py [--bench build/tools/bench/nostrum-conv-bench] [--threads 2]
       [--batch 32] [--image 224] [--repeats 3] [--blas avx512|env] [--only SUBSTRING]
Prints a table of GFLOP/s and ratios and, last, the time of all convs of one training step.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_env import blas_env  # noqa: E402
import torch_conv_bench  # noqa: E402

PASSES = ("forward", "backward_data", "backward_weights")


def run_bench(args, env, extra):
    cmd = [args.bench, "--batch", str(args.batch), "--image", str(args.image),
           "--repeats", str(args.repeats)] + extra
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bench = os.path.join(here, "..", "..", "build", "tools", "bench", "nostrum-conv-bench")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default=default_bench)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas", default="avx512", choices=["avx512", "env"])
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    env = blas_env(args.blas)
    env["OMP_NUM_THREADS"] = str(args.threads)

    def ceiling():
        line = run_bench(args, env, ["--only", "no conv has this name"]).splitlines()[0]
        return line  # "# nostrum-conv-bench: threads T, openblas core X, SGEMM 2048^3 G GFLOP/s"

    convs = [json.loads(l) for l in run_bench(args, env, ["--list"]).splitlines()]
    convs = [c for c in convs if args.only in c["conv"]]
    head = ceiling()
    print(head)
    print(f"# PyTorch {torch.__version__}, {args.threads} threads; GFLOP/s, best of {args.repeats}; "
          "ratio = nostrum / PyTorch")
    print(f"# {'conv':<38} {'n':>2}  {'fwd':>13} {'bwd-data':>13} {'bwd-weights':>13}   ratios")
    total = {"nostrum": 0.0, "torch": 0.0}
    flops_total = 0.0
    for i, conv in enumerate(convs):
        def ours():
            out = run_bench(args, env, ["--only", conv["conv"], "--no-ceiling"])
            return json.loads(next(l for l in out.splitlines() if l.startswith("{")))

        # Alternate who goes first, so that drifting load on the machine favours neither side.
        if i % 2 == 0:
            ours_result = ours()
            t_torch = torch_conv_bench.time_conv(conv, args.repeats)
        else:
            t_torch = torch_conv_bench.time_conv(conv, args.repeats)
            ours_result = ours()
        gflop = ours_result["gflop"]
        n = {p: ours_result[p + "_gflops"] for p in PASSES}
        t = {p: gflop / t_torch[p] for p in PASSES}
        cells = "  ".join(f"{n[p]:6.1f}/{t[p]:6.1f}" for p in PASSES)
        ratios = " ".join(f"{n[p] / t[p]:4.2f}" for p in PASSES)
        print(f"  {conv['conv']:<38} {conv['count']:>2}  {cells}   {ratios}", flush=True)
        stem = conv["C"] <= 4  # the stem needs no input gradient
        used = [p for p in PASSES if not (stem and p == "backward_data")]
        flops_total += conv["count"] * gflop * len(used)
        total["nostrum"] += conv["count"] * sum(gflop / n[p] for p in used)
        total["torch"] += conv["count"] * sum(t_torch[p] for p in used)
    print(ceiling().replace("nostrum-conv-bench", "after").strip())
    print(f"# all convs of one training step ({flops_total:.0f} GFLOP): nostrum {total['nostrum']:.2f} s "
          f"({flops_total / total['nostrum']:.1f} GFLOP/s), PyTorch {total['torch']:.2f} s "
          f"({flops_total / total['torch']:.1f} GFLOP/s): ratio {total['torch'] / total['nostrum']:.2f}")


if __name__ == "__main__":
    main()
