#!/usr/bin/python3
"""MLPerf training score from N result logs of one benchmark (5 for ResNet).

Time to train of a run = run_stop.time_ms - run_start.time_ms. A run counts as converged only if
its run_stop carries metadata status "success". MLPerf's scoring (training rules, "Benchmark
results"): drop the fastest and the slowest run and report the arithmetic mean of the rest
("olympic average"). A run that did not converge is scored as infinitely slow: one failed run out
of five is the run dropped as slowest and the result stands; with two or more failed runs an
infinite time stays in the average, the benchmark has no result, and this tool exits 1.

Usage: score.py LOG [LOG ...] [--runs 5] [--json]
--runs is the count the benchmark requires (ResNet: 5); fewer logs is an error, more are refused.
Exit status 0 with the score, 1 when there is no valid score, 2 on bad input (unreadable log,
missing run_start/run_stop).
"""
import argparse
import json
import math
import re
import sys

LINE = re.compile(r"^:::MLLOG (.*)$")


class InputError(Exception):
    pass


def run_time(path):
    """(seconds, status) of one result log; raises InputError for a log without its run events."""
    starts, stops = [], []
    try:
        with open(path, encoding="utf-8") as f:
            for n, raw in enumerate(f, 1):
                m = LINE.match(raw.rstrip("\n"))
                if not m:
                    continue
                try:
                    rec = json.loads(m.group(1))
                except ValueError as e:
                    raise InputError("%s:%d: not valid JSON: %s" % (path, n, e))
                if rec.get("key") == "run_start":
                    starts.append(rec)
                elif rec.get("key") == "run_stop":
                    stops.append(rec)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e))
    if len(starts) != 1 or len(stops) != 1:
        raise InputError("%s: needs exactly one run_start and one run_stop, found %d and %d"
                         % (path, len(starts), len(stops)))
    seconds = (stops[0]["time_ms"] - starts[0]["time_ms"]) / 1000.0
    if seconds < 0:
        raise InputError("%s: run_stop precedes run_start" % path)
    status = stops[0].get("metadata", {}).get("status", "missing")
    return seconds, status


def olympic_average(times):
    """Mean after dropping one fastest and one slowest (inf for failed runs); None if any inf left."""
    kept = sorted(times)[1:-1]
    if any(math.isinf(t) for t in kept):
        return None
    return sum(kept) / len(kept)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--runs", type=int, default=5, help="runs the benchmark requires (ResNet: 5)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if args.runs < 3:
        print("error: --runs must be >= 3 (one fastest and one slowest are dropped)")
        return 2
    if len(args.logs) != args.runs:
        print("error: %d logs given, the benchmark needs exactly %d runs" % (len(args.logs), args.runs))
        return 2
    runs = []
    try:
        for path in args.logs:
            seconds, status = run_time(path)
            runs.append({"log": path, "seconds": seconds, "status": status,
                         "scored_seconds": seconds if status == "success" else math.inf})
    except InputError as e:
        print("error: %s" % e)
        return 2
    score = olympic_average([r["scored_seconds"] for r in runs])
    failed = sum(1 for r in runs if r["status"] != "success")
    if args.json:
        print(json.dumps({"runs": [{k: (None if isinstance(v, float) and math.isinf(v) else v)
                                    for k, v in r.items()} for r in runs],
                          "failed_runs": failed,
                          "score_seconds": score,
                          "score_minutes": None if score is None else score / 60.0}, indent=2))
    else:
        for r in runs:
            print("%-40s %10.3f s  %s" % (r["log"], r["seconds"], r["status"]))
        if score is None:
            print("no score: %d of %d runs did not converge (at most 1 may fail)" % (failed, len(runs)))
        else:
            print("score: %.3f s = %.3f min (mean of %d runs, fastest and slowest dropped)"
                  % (score, score / 60.0, len(runs) - 2))
    return 1 if score is None else 0


if __name__ == "__main__":
    sys.exit(main())
