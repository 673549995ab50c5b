#!/usr/bin/python3
"""How a measured conv table moves from one process to the next, by candidate family: measures the
table N times in a row (nostrum-bench --conv-kernel measure --conv-cache none --verbose, one
process each) and prints, for each later process and each candidate, the median over the passes
both timed in full (no cut-short time) of its time there over its time in the first process.
Candidates that move alike keep their order; one that moves against the others is what turns a
near-tie into a different choice (tools/bench/conv_remeasure.py's misses). Before each process,
the round trip between CPUs 0 and 1 (nostrum-round-trip-bench) and, after it, the huge pages it
held (its JSON line's anon_huge_pages_mb) are printed.

Usage: tools/bench/conv_table_spread.py [--build build] [--model resnet50] [--image 224x224x3]
           [--batch 32] [--threads 2] [--precision bf16] [--processes 3] [--gap 0]
           [-- PREFIX...]   (a command to run nostrum-bench under, e.g. -- setarch -R)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from conv_remeasure import measure  # the table's run and parsing (tools/bench/conv_remeasure.py)


def table(args, prefix):
    """One process's timings {(shape, pass, candidate): ms}, cut-short ones left out, and its JSON
    line."""
    bench = os.path.join(args.build, "tools", "bench", "nostrum-bench")
    rows, result = measure(bench, args, prefix)
    times = {(shape, pass_, c): ms for (shape, pass_), (_, timed, _, cut, _) in rows.items()
             for c, ms in timed.items() if c not in cut}
    return times, result


def main():
    argv = sys.argv[1:]
    prefix = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image", default="224x224x3")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between processes")
    args = parser.parse_args(argv)
    if args.processes < 2:
        sys.exit("conv_table_spread: --processes must be 2 or more")
    probe = os.path.join(args.build, "tools/bench/nostrum-round-trip-bench")
    tables = []
    for i in range(args.processes):
        trip = subprocess.run([probe, "--samples", "1"], check=True, capture_output=True,
                              text=True).stdout.strip()
        times, result = table(args, prefix)
        tables.append(times)
        print(f"process {i + 1}: round trip {trip} ns before, anon huge pages "
              f"{result.get('anon_huge_pages_mb')} MB", flush=True)
        if i + 1 < args.processes:
            time.sleep(args.gap)
    candidates = sorted({key[2] for key in tables[0]})
    for k in range(1, len(tables)):
        for c in candidates:
            ratios = [tables[k][key] / tables[0][key] for key in tables[0]
                      if key[2] == c and key in tables[k]]
            if len(ratios) >= 3:
                print(f"process {k + 1} / process 1, {c}: median {statistics.median(ratios):.3f} "
                      f"over {len(ratios)} passes (range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
