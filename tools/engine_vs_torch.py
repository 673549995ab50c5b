#!/usr/bin/python3
"""Training-step speed (forward + loss + backward, no optimizer) of one model in nostrum and in
PyTorch on the same machine, same threads, in one run: prints one JSON line per side and the ratio.
PyTorch runs best of NCHW and channels_last. The full benchmark (optimizer, RSS, --layers) is
nostrum-bench (issue 4).

  tools/engine_vs_torch.py [--model resnet50] [--size 224] [--batch 32] [--threads 2] [--steps 3]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "weights"))


def torch_side(a):
    import torch
    import torch.nn.functional as F
    from cifar_resnet import build_model
    torch.set_num_threads(a.threads)
    best = None
    for fmt in (torch.contiguous_format, torch.channels_last):
        model = build_model(a.model, a.classes, a.channels).to(memory_format=fmt)
        model.train()
        x = torch.randn(a.batch, a.channels, a.size, a.size).to(memory_format=fmt)
        y = torch.randint(0, a.classes, (a.batch,))
        times = []
        for step in range(a.steps + 1):
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            model.zero_grad(set_to_none=True)
            loss.backward()
            if step > 0:
                times.append(time.perf_counter() - t0)
        median = sorted(times)[len(times) // 2]
        ips = a.batch / median
        if best is None or ips > best[0]:
            best = (ips, "channels_last" if fmt == torch.channels_last else "nchw")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"side": "pytorch", "model": a.model, "batch": a.batch, "threads": a.threads,
                      "images_per_second": round(best[0], 3), "layout": best[1],
                      "peak_rss_mb": round(rss)}), flush=True)
    return best[0]


def nostrum_side(a):
    exe = os.path.join(a.build, "tools", "nostrum-engine-speed")
    cmd = ["/usr/bin/time", "-f", "%M", exe, "--model", a.model, "--batch", str(a.batch), "--size", str(a.size),
           "--channels", str(a.channels), "--classes", str(a.classes), "--steps", str(a.steps)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    result = {"side": "nostrum", **result, "peak_rss_mb": round(int(r.stderr.strip().splitlines()[-1]) / 1024)}
    print(json.dumps(result), flush=True)
    return result["images_per_second"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    a = p.parse_args()
    ours = nostrum_side(a)
    theirs = torch_side(a)
    print(json.dumps({"ratio_nostrum_over_pytorch": round(ours / theirs, 2)}))


if __name__ == "__main__":
    main()
