#!/usr/bin/python3
"""PyTorch's side of nostrum-bench: the same model, batch, threads and synthetic training step
(forward, label-smoothed cross-entropy, backward, SGD-momentum update), one memory format per run.

Usage: torch_bench.py --model M --image HxWxC --batch N --threads T [--steps K] [--warmup W]
                      [--classes K] [--format nchw|channels_last] [--precision fp32|bf16]
bf16: forward and loss under torch.cpu.amp.autocast(dtype=torch.bfloat16), PyTorch's fastest CPU
training mode.
Prints one JSON line with the keys nostrum-bench prints (images_per_second is batch / median step).
"""
import argparse
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "weights"))
from cifar_resnet import CIFAR_BLOCKS, build_model  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image", default="224x224x3")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--classes", type=int, default=0)
    parser.add_argument("--format", default="channels_last", choices=["nchw", "channels_last"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()
    h, w, c = (int(v) for v in args.image.split("x"))
    classes = args.classes or (10 if args.model in CIFAR_BLOCKS else 1000)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    fmt = torch.channels_last if args.format == "channels_last" else torch.contiguous_format
    model = build_model(args.model, num_classes=classes, in_channels=c).to(memory_format=fmt)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    images = torch.randn(args.batch, c, h, w).to(memory_format=fmt)
    labels = torch.randint(0, classes, (args.batch,))
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.cpu.amp.autocast(enabled=args.precision == "bf16", dtype=torch.bfloat16):
            loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "model": args.model, "image": args.image, "batch": args.batch, "threads": args.threads,
        "images_per_second": round(args.batch / median, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),
        "format": args.format, "precision": args.precision, "torch": torch.__version__, "step_seconds": round(median, 4),
        "steps": args.steps, "loss": round(float(loss), 4)}), flush=True)


if __name__ == "__main__":
    main()
