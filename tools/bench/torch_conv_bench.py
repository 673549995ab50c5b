#!/usr/bin/python3
"""PyTorch's side of the conv benchmark: forward, backward-data and backward-weights of one conv
geometry (NCHW and channels_last, best of both), best-of-N seconds, printed as one JSON line.

Usage: torch_conv_bench.py --threads 2 --repeats 3 '{"conv": ..., "N": .., "H": .., ...}' ...
Each positional argument is one JSON geometry line as `nostrum-conv-bench --list` prints it.
"""
import argparse
import json
import time

import torch


def best_seconds(repeats, fn):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def time_conv(geo, repeats, dtype=torch.float32):
    """Best seconds of forward, backward-data, backward-weights over NCHW and channels_last, the
    tensors in `dtype` (torch.bfloat16: what autocast's convolutions see, bf16 in and out)."""
    n, h, w, c, k = geo["N"], geo["H"], geo["W"], geo["C"], geo["K"]
    r, s, stride, pad = geo["R"], geo["S"], geo["stride"], geo["pad"]
    p = (h + 2 * pad - r) // stride + 1
    q = (w + 2 * pad - s) // stride + 1
    best = {}
    for fmt in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(n, c, h, w).to(dtype).to(memory_format=fmt)
        weight = torch.randn(k, c, r, s).to(dtype).to(memory_format=fmt)
        dy = torch.randn(n, k, p, q).to(dtype).to(memory_format=fmt)
        args = ([stride, stride], [pad, pad], [1, 1], False, [0, 0], 1)
        with torch.no_grad():
            fwd = best_seconds(repeats, lambda: torch.nn.functional.conv2d(
                x, weight, None, stride, pad))
            bwd_d = best_seconds(repeats, lambda: torch.ops.aten.convolution_backward(
                dy, x, weight, None, *args, [True, False, False]))
            bwd_w = best_seconds(repeats, lambda: torch.ops.aten.convolution_backward(
                dy, x, weight, None, *args, [False, True, False]))
        for key, t in (("forward", fwd), ("backward_data", bwd_d), ("backward_weights", bwd_w)):
            best[key] = min(best.get(key, float("inf")), t)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("geometry", nargs="+", help="JSON geometry lines")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for line in args.geometry:
        geo = json.loads(line)
        flops = 2.0 * geo["N"] * geo["K"] * geo["C"] * geo["R"] * geo["S"] * \
            ((geo["H"] + 2 * geo["pad"] - geo["R"]) // geo["stride"] + 1) * \
            ((geo["W"] + 2 * geo["pad"] - geo["S"]) // geo["stride"] + 1)
        t = time_conv(geo, args.repeats)
        print(json.dumps({"conv": geo["conv"], "threads": args.threads, "gflop": flops * 1e-9,
                          "forward_gflops": flops * 1e-9 / t["forward"],
                          "backward_data_gflops": flops * 1e-9 / t["backward_data"],
                          "backward_weights_gflops": flops * 1e-9 / t["backward_weights"]}),
              flush=True)


if __name__ == "__main__":
    main()
