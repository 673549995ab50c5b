#!/usr/bin/python3
"""Each convolution pass in the training step against its own measurement: whether the step's
convolutions run as fast as the kernel measurement timed them.

Usage: tools/bench/conv_in_step.py [--model resnet50|resnet8] [--image 224] [--batch 32]
       [--threads 2] [--precision fp32|bf16] [--steps 5] [--top 15] [--build build]
One `nostrum-bench --conv-kernel measure --conv-cache none --verbose --layers` run: the table's
time of each pass's chosen kernel (the median of its measured calls, on the measurement's own
operands) and the same pass's time in the step's per-layer profile (each layer's mean over the
timed steps, operands as the step leaves them in memory). Each shape counts as many times as the
model has layers of it. Prints the totals by pass, then the passes that lose most in the step.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blas_env import blas_env  # noqa: E402
from compare_conv_passes import (PASSES, ROW, TIMING, model_parser,  # noqa: E402
                                 parse_model_args, shape_name)

# A --layers row: name, then ms and GFLOP/s of forward, backward-data, backward-weights, step %.
LAYER = re.compile(r"^# (\S+)" + r"\s+([0-9.]+)" * 7 + r"$")


def geometry_of_layer(name, shapes):
    """The shape of a profile row's conv: its listing name, a downsample's without the '.0', a
    later block's as the listing's 'layerX.k'."""
    base = name[:-2] if name.endswith(".downsample.0") else name
    for candidate in (base, re.sub(r"^(layer\d+)\.[1-9]\d*\.", r"\1.k.", base)):
        if candidate in shapes:
            return shapes[candidate]
    return None


def main():
    parser = model_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parse_model_args(parser)
    bench = os.path.join(args.build, "tools", "bench")
    env = blas_env("avx512")
    env["OMP_NUM_THREADS"] = str(args.threads)

    listing = subprocess.run(
        [os.path.join(bench, "nostrum-conv-bench"), "--list", "--model", args.model, "--image",
         str(args.image), "--batch", str(args.batch)],
        env=env, check=True, capture_output=True, text=True).stdout
    shapes = {}
    for line in listing.splitlines():
        conv = json.loads(line)
        shapes[conv["conv"].split(" ")[0]] = shape_name(conv)

    image = f"{args.image}x{args.image}x{3 if args.model == 'resnet50' else 1}"
    run = subprocess.run(
        [os.path.join(bench, "nostrum-bench"), "--model", args.model, "--image", image, "--batch",
         str(args.batch), "--threads", str(args.threads), "--steps", str(args.steps), "--warmup",
         "1", "--precision", args.precision, "--conv-kernel", "measure", "--conv-cache", "none",
         "--verbose", "--layers"],
        env=env, check=True, capture_output=True, text=True)
    output = run.stdout + run.stderr
    table = {}
    for line in output.splitlines():
        m = ROW.match(line)
        if m:
            times = {name: float(ms) for name, ms in TIMING.findall(m.group(3))}
            table[(m.group(1), m.group(2))] = (m.group(4), times[m.group(4)])
    if not table:
        sys.exit("conv_in_step: no conv kernel table in nostrum-bench's output:\n" + output)
    classifier = [shape for shape, _ in table if " H1 W1 " in shape]

    total = {p: [0.0, 0.0] for p in PASSES}
    rows, unmapped = [], []
    for line in output.splitlines():
        m = LAYER.match(line)
        if not m:
            continue
        name, values = m.group(1), [float(v) for v in m.groups()[1:]]
        if not any(values[1:6:2]):
            continue  # no arithmetic: a memory-bound layer
        shape = classifier[0] if name == "fc" and classifier else geometry_of_layer(name, shapes)
        if shape is None:
            unmapped.append(name)
            continue
        for i, p in enumerate(PASSES):
            step_ms = values[2 * i]
            if (shape, p) not in table or step_ms == 0.0:
                continue
            kernel, table_ms = table[(shape, p)]
            total[p][0] += table_ms
            total[p][1] += step_ms
            rows.append((step_ms - table_ms, name, p, table_ms, step_ms, kernel))

    print(f"# {args.model} {image} batch {args.batch}, {args.threads} threads, {args.precision}, "
          f"{args.steps} steps; ms a step; ratio = in the step / measured")
    for p in PASSES:
        t, s = total[p]
        print(f"# {p:<16} measured {t:8.1f}  in the step {s:8.1f}  ratio {s / t:.3f}")
    t, s = sum(v[0] for v in total.values()), sum(v[1] for v in total.values())
    print(f"# all convolutions measured {t:8.1f}  in the step {s:8.1f}  ratio {s / t:.3f}")
    if unmapped:
        print("# layers with no listed shape (left out): " + ", ".join(unmapped))
    print(f"# the {args.top} passes that lose most in the step:")
    print(f"# {'layer':<24} {'pass':<16} {'measured':>8} {'step':>8} {'extra':>7}  kernel")
    for extra, name, p, table_ms, step_ms, kernel in sorted(rows, reverse=True)[:args.top]:
        print(f"  {name:<24} {p:<16} {table_ms:8.2f} {step_ms:8.2f} {extra:+7.2f}  {kernel}")
    summary = next((line for line in output.splitlines() if line.startswith("{")), "")
    if summary:
        result = json.loads(summary)
        print(f"# step {result['step_seconds'] * 1e3:.1f} ms, {result['images_per_second']:.1f} "
              f"images/s")


if __name__ == "__main__":
    main()
