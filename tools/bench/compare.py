#!/usr/bin/python3
"""nostrum against PyTorch on the issue's benchmark cases, interleaved in one invocation: per case
the SGEMM ceiling probe, nostrum-bench, and PyTorch in NCHW and channels_last (best of both), the
order alternating between rounds so that drifting machine load favours neither side.

Usage: tools/bench/compare.py [--build build] [--cases 1,2,3] [--threads 2] [--rounds 1]
                              [--blas avx512|env|both] [--steps K]
Cases: 1 resnet50 224x224x3 batch 32; 2 resnet8 28x28x1 batch 128 (10 classes); 3 resnet50 64x64x3
batch 64. Prints every JSON line it collects, then the table of ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from blas_env import blas_env  # noqa: E402

CASES = {
    "1": dict(model="resnet50", image="224x224x3", batch=32, steps=3),
    "2": dict(model="resnet8", image="28x28x1", batch=128, steps=10),
    "3": dict(model="resnet50", image="64x64x3", batch=64, steps=5),
}


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def sgemm_gflops(build, env):
    out = subprocess.run([os.path.join(build, "tools", "bench", "nostrum-conv-bench"), "--only",
                          "-", "--repeats", "3"], env=env, check=True, capture_output=True,
                         text=True).stdout.splitlines()[0]
    # "# nostrum-conv-bench: threads T, openblas core X, SGEMM 2048^3 G GFLOP/s"
    return float(out.split("SGEMM 2048^3")[1].split()[0]), out.split("openblas core")[1].split(",")[0].strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--cases", default="1,2,3")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--blas", default="avx512", choices=["avx512", "env", "both"])
    parser.add_argument("--steps", type=int, default=0, help="timed steps (0: per-case default)")
    args = parser.parse_args()
    modes = ["avx512", "env"] if args.blas == "both" else [args.blas]
    bench = os.path.join(args.build, "tools", "bench", "nostrum-bench")
    results = []  # (mode, case, ours, theirs_best, ceiling, core)
    for mode in modes:
        env = blas_env(mode)
        env["OMP_NUM_THREADS"] = str(args.threads)
        for case in args.cases.split(","):
            spec = CASES[case]
            steps = str(args.steps or spec["steps"])
            common = ["--model", spec["model"], "--image", spec["image"], "--batch",
                      str(spec["batch"]), "--threads", str(args.threads), "--steps", steps]
            ours, theirs, ceilings, core = [], [], [], ""
            for r in range(args.rounds):
                def run_ours():
                    ours.append(run_json([bench] + common, env))
                    print(json.dumps(ours[-1]), flush=True)

                def run_theirs():
                    for fmt in ("nchw", "channels_last"):
                        theirs.append(run_json(["/usr/bin/python3", os.path.join(HERE, "torch_bench.py")]
                                               + common + ["--format", fmt], env))
                        print(json.dumps(theirs[-1]), flush=True)
                g, core = sgemm_gflops(args.build, env)
                ceilings.append(g)
                order = (run_ours, run_theirs) if r % 2 == 0 else (run_theirs, run_ours)
                for fn in order:
                    fn()
                g, core = sgemm_gflops(args.build, env)
                ceilings.append(g)
            best_ours = max(ours, key=lambda x: x["images_per_second"])
            best_theirs = max(theirs, key=lambda x: x["images_per_second"])
            results.append((mode, case, best_ours, best_theirs, statistics.median(ceilings), core))

    print()
    print(f"| case | BLAS | nostrum img/s | PyTorch img/s (format) | ratio | nostrum GFLOP/s | "
          f"SGEMM GFLOP/s | % of SGEMM | RSS nostrum / PyTorch MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, case, o, t, ceiling, core in results:
        spec = CASES[case]
        print(f"| {case}: {spec['model']} {spec['image']} b{spec['batch']} | {core} | "
              f"{o['images_per_second']:.2f} | {t['images_per_second']:.2f} ({t['format']}) | "
              f"{o['images_per_second'] / t['images_per_second']:.2f} | {o['gflops']:.1f} | "
              f"{ceiling:.1f} | {100 * o['gflops'] / ceiling:.0f} | "
              f"{o['peak_rss_mb']:.0f} / {t['peak_rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
