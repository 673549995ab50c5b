#!/usr/bin/python3
"""Whether the measured conv kernel choice holds when measured again: measures the table of one
model in K + N processes in a row (nostrum-bench --conv-kernel measure --conv-cache none --verbose),
then, per shape and pass, times the first table's choice (with --first K > 1, the choice of the
first K tables pooled by pool_tables, as nostrum-train pools its ranks' tables) by the N
measurements after them against their fastest candidate. The issue's bar: the chosen kernel within
5 % of the fastest. With N = 1 (the default) the next table is the judge; with N > 1, each
candidate's median over the N tables (pool_tables), so that a near-tie is judged by more than one
noisy reading; each of the N alone is also printed. A choice that a later measurement cut short
(its time from fewer calls, marked *) counts as measured; one it did not run because its floor
alone was over the cutoff (a bf16 run's fp32 candidate, printed `>X ms`) counts as missing the bar
by at least that floor; one it did not list at all (not eligible there) is an error.

Usage: tools/bench/conv_remeasure.py [--build build] --model M --image HxWxC --batch N
                                     [--threads 2] [--precision fp32|bf16] [--within 0.05]
                                     [--first K] [--again N]
Prints one line per pass that misses the bar, then a summary line and a JSON line:
{"passes": P, "first": K, "again": N, "within": W, "worst": r, "total": t, "one_state": Q,
"one_state_within": L, "each_within": [W2, ...], "first_each_within": [W1, ...],
"seconds": [s1, s2, ...], ...}; r = chosen / fastest - 1; t: the same for the sums over all passes
(what the choices cost the step's convolutions against the judge's fastest); Q: the passes whose
round trips (before and after, every measurement) read one host state, L: of them within the bar;
W2...: the bar against each later table alone; W1...: with K > 1, each of the first K tables alone
against the same judge (one process's choice beside the pooled one, on one host in one run). On a
machine whose host moves its CPUs (a VM), a choice made in one state is not wrong for being slower
in the other.
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

# A row of the --verbose table; a bf16 run's rows end with the operands that pass takes in bf16
# ("[bf16 operands: in d_out]"), and an accumulating data gradient's with "[d_in +=]": both are
# part of the row's identity (one shape and pass can be measured on fp32 operands in one block and
# on bf16 ones in another). A measured row then gives the host state it was measured in: the round
# trip between the pool's first two threads before and after, ns (src/core/pool_round_trip.cpp).
ROW = re.compile(r"^nostrum-bench: (N\d+ H\d+ W\d+ C\d+ K\d+ R\d+ S\d+ /\d+ p\d+) (\w+): (.*) -> "
                 r"(\w+) \((\w+)\)((?: \[bf16 operands:[^\]]*\])?(?: \[d_in \+=\])?)"
                 r"(?: \[round trip ([0-9]+) ([0-9]+) ns\])?$")
TIMING = re.compile(r"(\w+) (>?)([0-9.]+) ms(\*?)")


def parse_table(text):
    """The --verbose table rows in nostrum-bench's output: {(shape, pass): (chosen, {candidate: ms},
    {candidate: floor ms}, {candidates cut short}, (round trip before, after) ns or None)}."""
    table = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            # The candidates run and their times; those not run (floor over the cutoff), floors.
            times, floors, cut = {}, {}, set()
            for c, not_run, ms, short in TIMING.findall(m.group(3)):
                (floors if not_run else times)[c] = float(ms)
                if short:
                    cut.add(c)
            trips = (float(m.group(7)), float(m.group(8))) if m.group(7) else None
            table[(m.group(1), m.group(2) + (m.group(6) or ""))] = (m.group(4), times, floors, cut,
                                                                   trips)
    return table


def measure(bench, args, prefix=()):
    """One measured table (parse_table's) and the JSON line; `prefix`, a command to run
    nostrum-bench under."""
    cmd = list(prefix) + [bench, "--model", args.model, "--image", args.image, "--batch", str(args.batch),
           "--threads", str(args.threads), "--precision", args.precision, "--steps", "1",
           "--warmup", "0", "--conv-kernel", "measure", "--conv-cache", "none", "--verbose"]
    run = subprocess.run(cmd, check=True, capture_output=True, text=True)
    table = parse_table(run.stdout + run.stderr)
    result = json.loads([l for l in run.stdout.splitlines() if l.startswith("{")][-1])
    if not table:
        sys.exit("conv_remeasure: no conv kernel table in the output of " + " ".join(cmd))
    # Every measured pass must have been read: a row the pattern missed would drop out of the bar.
    if len(table) != result["conv_measured"]:
        sys.exit(f"conv_remeasure: read {len(table)} rows of the table, nostrum-bench measured "
                 f"{result['conv_measured']} passes: " + " ".join(cmd))
    return table, result


# Two round trips of one host state: neither over this many times the other (as
# nostrum::same_host_state: the Zen 5 VM's two states read 80-140 and 410-540 ns).
STATE_RATIO = 2.0


def one_host_state(trips):
    """Whether every round trip was taken in one host state (True when none was probed)."""
    trips = [t for t in trips if t > 0]
    return not trips or max(trips) <= STATE_RATIO * min(trips)


def describe_trips(trips):
    return "-" if trips is None else f"{trips[0]:.0f}/{trips[1]:.0f}"


def pool_tables(tables):
    """Several measurements of one table taken as one, parse_table's form: per pass, each
    candidate's median over the measurements; a measurement that did not run it (its floor alone
    over the cutoff) gives its floor, a bound below its time, so a pooled time is never above what
    was measured. The pooled choice is the fastest pooled time; a candidate cut short in any of them
    is marked cut; the round trips are the lowest and highest read. One table is itself."""
    if len(tables) == 1:
        return tables[0]
    if any(set(t) != set(tables[0]) for t in tables):
        sys.exit("conv_remeasure: the measurements list different passes")
    pooled = {}
    for key in tables[0]:
        rows = [t[key] for t in tables]
        names = []
        for row in rows:
            names += [c for c in list(row[1]) + list(row[2]) if c not in names]
        times, cut = {}, set()
        for c in names:
            values = [row[1][c] if c in row[1] else row[2][c] for row in rows
                      if c in row[1] or c in row[2]]
            times[c] = statistics.median(values)
            if any(c in row[3] for row in rows):
                cut.add(c)
        trips = [x for row in rows if row[4] for x in row[4]]
        # As nostrum's pool_conv_tables: a candidate some measurement did not run is not chosen.
        ran_in_all = [c for c in times if all(c in row[1] for row in rows)]
        chosen = min(ran_in_all or times, key=times.get)
        pooled[key] = (chosen, times, {}, cut, (min(trips), max(trips)) if trips else None)
    return pooled


def ms_text(ms):
    """A time in ms as the table prints it: 4 significant digits at least (3 to 6 decimals)."""
    decimals = min(6, max(3, 3 - math.floor(math.log10(ms)))) if ms > 0 else 3
    return f"{ms:.{decimals}f}"


def compare(first, second, within):
    """first's choices against second's fastest, per pass: {"within", "worst", "changed",
    "chosen_ms", "fastest_ms", "one_state", "one_state_within", "misses": [line, ...]}."""
    if set(first) != set(second):
        sys.exit("conv_remeasure: the two tables list different passes")
    out = {"within": 0, "worst": 0.0, "changed": 0, "chosen_ms": 0.0, "fastest_ms": 0.0,
           "one_state": 0, "one_state_within": 0, "misses": []}
    for key in first:
        chosen, times1, _, _, trips1 = first[key]
        chosen2, times, floors, _, trips2 = second[key]
        one_state = one_host_state((trips1 or ()) + (trips2 or ()))
        out["one_state"] += one_state
        if chosen not in times and chosen not in floors:
            sys.exit(f"conv_remeasure: {chosen} not timed for {key[0]} {key[1]} the second time")
        ran = chosen in times
        ours = times[chosen] if ran else floors[chosen]  # not run the second time: its floor
        ratio = ours / min(times.values()) - 1
        out["chosen_ms"] += ours
        out["fastest_ms"] += min(times.values())
        out["changed"] += chosen != chosen2
        out["worst"] = max(out["worst"], ratio)
        if ratio <= within:
            out["within"] += 1
            out["one_state_within"] += one_state
        else:
            out["misses"].append(
                f"{key[0]} {key[1]}: {chosen} {ms_text(ours)} ms"
                f"{'' if ran else ' (not run: its floor)'}, fastest {chosen2} "
                f"{ms_text(min(times.values()))} ms (+{100 * ratio:.1f} %); first: " +
                ", ".join(f"{c} {ms_text(ms)}" for c, ms in times1.items()) + "; again: " +
                ", ".join(f"{c} {ms_text(ms)}" for c, ms in times.items()) +
                f"; round trips {describe_trips(trips1)}, {describe_trips(trips2)} ns")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--within", type=float, default=0.05)
    parser.add_argument("--again", type=int, default=1,
                        help="measurements after the first, pooled (each candidate's median)")
    parser.add_argument("--first", type=int, default=1,
                        help="measurements whose pooled choice is judged (each candidate's median, "
                             "as nostrum-train pools its ranks' tables); 1: one process's choice")
    args = parser.parse_args()
    if args.again < 1:
        parser.error(f"--again {args.again}: measure the table again at least once")
    if args.first < 1:
        parser.error(f"--first {args.first}: the choice needs at least one measurement")
    bench = os.path.join(args.build, "tools", "bench", "nostrum-bench")
    firsts = [measure(bench, args) for _ in range(args.first)]
    first = pool_tables([table for table, _ in firsts])
    again = [measure(bench, args) for _ in range(args.again)]
    each = [compare(first, table, args.within) for table, _ in again]
    if args.again > 1:
        for k, c in enumerate(each, start=args.first + 1):
            print(f"measurement {k}: {c['within']} of {len(first)} passes within "
                  f"{100 * args.within:.0f} % of its fastest; worst +{100 * c['worst']:.1f} %; all "
                  f"passes +{100 * (c['chosen_ms'] / c['fastest_ms'] - 1):.1f} %")
    judge = pool_tables([table for table, _ in again])
    c = compare(first, judge, args.within)
    # With K > 1, each of the first K alone against the same judge: one process's choice, measured
    # in the same run as the pooled one, so the two compare on one host.
    alone = [compare(table, judge, args.within) for table, _ in firsts] if args.first > 1 else []
    for k, a in enumerate(alone, start=1):
        print(f"measurement {k} alone: {a['within']} of {len(first)} passes within "
              f"{100 * args.within:.0f} % of the judge's fastest; "
              f"worst +{100 * a['worst']:.1f} %; "
              f"all passes +{100 * (a['chosen_ms'] / a['fastest_ms'] - 1):.1f} %")
    for line in c["misses"]:
        print(line)
    seconds = [r["conv_measure_seconds"] for _, r in firsts + again]
    second = ("next measurement" if args.again == 1 else
              f"{args.again} after (each candidate's median)")
    chooser = ("the first measurement's choice" if args.first == 1 else
               f"the pooled choice of the first {args.first} measurements")
    print(f"{c['within']} of {len(first)} passes: {chooser} within "
          f"{100 * args.within:.0f} % of the {second}'s fastest; {c['changed']} chose differently; "
          f"worst +{100 * c['worst']:.1f} %; measurement " +
          " and ".join(f"{s:.1f} s" for s in seconds) + "; all passes: the choices "
          f"{c['chosen_ms']:.1f} ms against the fastest {c['fastest_ms']:.1f} ms "
          f"(+{100 * (c['chosen_ms'] / c['fastest_ms'] - 1):.1f} %); of the {c['one_state']} passes "
          f"measured in one host state throughout (the round trips within {STATE_RATIO:g}x), "
          f"{c['one_state_within']} within")
    print(json.dumps({"model": args.model, "image": args.image, "batch": args.batch,
                      "threads": args.threads, "precision": args.precision,
                      "passes": len(first), "first": args.first, "again": args.again,
                      "within": c["within"],
                      "changed": c["changed"], "worst": round(c["worst"], 4),
                      "total": round(c["chosen_ms"] / c["fastest_ms"] - 1, 4),
                      "one_state": c["one_state"], "one_state_within": c["one_state_within"],
                      "each_within": [e["within"] for e in each],
                      "first_each_within": [a["within"] for a in alone], "seconds": seconds}))


if __name__ == "__main__":
    main()
