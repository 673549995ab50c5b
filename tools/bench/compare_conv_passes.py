#!/usr/bin/python3
"""The measured conv kernel choice, pass by pass, against PyTorch's same pass: where a training
step's convolutions gain or lose against the peer.

Usage: tools/bench/compare_conv_passes.py [--model resnet50|resnet8] [--image 224] [--batch 32]
       [--threads 2] [--precision fp32|bf16] [--repeats 3] [--build build]
nostrum's side is its conv kernel measurement (`nostrum-bench --conv-kernel measure --verbose`:
every eligible candidate per distinct shape and pass, the median of up to 3 calls, nostrum's fp32
tensors; bf16 rounds the operands inside the pass), taken before and after PyTorch's side, the
faster of the two runs' chosen kernel kept per pass. PyTorch's side is `torch_conv_bench.time_conv`
(conv2d and convolution_backward, best of NCHW and channels_last, best of --repeats); with bf16 its
tensors are bf16, as its autocast's convolutions see them. Each pass counts as many times as the
model has layers of its shape; the stem has no backward-data pass. Prints a row per shape and pass
and the totals of one training step's convolutions.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_env import blas_env  # noqa: E402
import torch_conv_bench  # noqa: E402

PASSES = ("forward", "backward_data", "backward_weights")
ROW = re.compile(r"^nostrum-bench: (N\d+ H\d+ W\d+ C\d+ K\d+ R\d+ S\d+ /\d+ p\d+) (\w+):(.*) -> (\S+) \(")
TIMING = re.compile(r" (\S+) ([0-9.]+) ms\*?")


def shape_name(g):
    return (f"N{g['N']} H{g['H']} W{g['W']} C{g['C']} K{g['K']} R{g['R']} S{g['S']} "
            f"/{g['stride']} p{g['pad']}")


def measured_choice(args, env):
    """{(shape, pass): (chosen, seconds)} from one measurement."""
    image = f"{args.image}x{args.image}x{3 if args.model == 'resnet50' else 1}"
    cmd = [os.path.join(args.build, "tools", "bench", "nostrum-bench"), "--model", args.model,
           "--image", image, "--batch", str(args.batch), "--threads", str(args.threads),
           "--steps", "1", "--warmup", "0", "--precision", args.precision,
           "--conv-kernel", "measure", "--conv-cache", "none", "--verbose"]
    err = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stderr
    table = {}
    for line in err.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        times = {name: float(ms) * 1e-3 for name, ms in TIMING.findall(m.group(3))}
        table[(m.group(1), m.group(2))] = (m.group(4), times[m.group(4)])
    if not table:
        sys.exit("compare_conv_passes: no conv kernel table in nostrum-bench's output:\n" + err)
    return table


def model_parser(description):
    """The options of a per-pass conv benchmark: build, model, image, batch, threads, precision."""
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    parser.add_argument("--model", default="resnet50", choices=["resnet50", "resnet8"])
    parser.add_argument("--image", type=int, default=0, help="224 (resnet50) or 28 (resnet8)")
    parser.add_argument("--batch", type=int, default=0, help="32 (resnet50) or 128 (resnet8)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    return parser


def parse_model_args(parser):
    """parser's arguments, the image and batch defaulted by the model."""
    args = parser.parse_args()
    args.image = args.image or (224 if args.model == "resnet50" else 28)
    args.batch = args.batch or (32 if args.model == "resnet50" else 128)
    return args


def main():
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_model_args(parser)

    import torch
    torch.set_num_threads(args.threads)
    env = blas_env("avx512")
    env["OMP_NUM_THREADS"] = str(args.threads)
    listing = subprocess.run(
        [os.path.join(args.build, "tools", "bench", "nostrum-conv-bench"), "--list", "--model",
         args.model, "--image", str(args.image), "--batch", str(args.batch)],
        env=env, check=True, capture_output=True, text=True).stdout
    convs = [json.loads(line) for line in listing.splitlines()]

    before = measured_choice(args, env)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    theirs = [torch_conv_bench.time_conv(c, args.repeats, dtype) for c in convs]
    after = measured_choice(args, env)

    print(f"# {args.model} {args.image}x{args.image} batch {args.batch}, {args.threads} threads, "
          f"{args.precision}; PyTorch {torch.__version__} ({'bf16' if dtype == torch.bfloat16 else 'fp32'} "
          "tensors); ms per call; ratio = PyTorch / nostrum (above 1: nostrum faster)")
    print(f"# {'conv':<40} {'n':>2} {'pass':<16} {'nostrum':>8} {'kernel':<22} {'PyTorch':>8} {'ratio':>5}")
    total = {p: [0.0, 0.0] for p in PASSES}
    for conv, t in zip(convs, theirs):
        stem = conv["C"] <= 4
        for p in PASSES:
            if stem and p == "backward_data":
                continue
            key = (shape_name(conv), p)
            runs = [r[key] for r in (before, after) if key in r]
            if not runs:
                continue
            kernel, ours = min(runs, key=lambda r: r[1])
            total[p][0] += conv["count"] * ours
            total[p][1] += conv["count"] * t[p]
            print(f"  {conv['conv']:<40} {conv['count']:>2} {p:<16} {ours * 1e3:8.2f} {kernel:<22} "
                  f"{t[p] * 1e3:8.2f} {t[p] / ours:5.2f}", flush=True)
    ours_all = sum(v[0] for v in total.values())
    theirs_all = sum(v[1] for v in total.values())
    for p in PASSES:
        print(f"# {p:<16} nostrum {total[p][0]:.3f} s, PyTorch {total[p][1]:.3f} s: "
              f"ratio {total[p][1] / total[p][0]:.2f}")
    print(f"# all convs of one step: nostrum {ours_all:.3f} s, PyTorch {theirs_all:.3f} s: "
          f"ratio {theirs_all / ours_all:.2f}")


if __name__ == "__main__":
    main()
