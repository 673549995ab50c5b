"""conv_ranks_ab_judge.py OUT TAG: the judge of conv_ranks_ab_2026-12-07_b06cb13_zen5.txt (runs from
conv_ranks_ab.sh). Judge each run's choices by the pooled arm's tables: each candidate's median over the pooled
runs (leave-one-out for a pooled run); a pass within 5 % when its chosen candidate's judged time is
at most 1.05x the fastest judged time. Prints per arm: passes within per run (median, range), and
the summed cost of the choices against the fastest."""
import glob, json, statistics, sys

out, tag = sys.argv[1], sys.argv[2]
def load(arm):
    tables = []
    for p in sorted(glob.glob(f"{out}/{tag}_{arm}_*.json")):
        tables.append(json.load(open(p))["conv_kernels"])
    return tables
root, pooled = load("root"), load("pooled")
def key(r):
    return (json.dumps(r["shape"], sort_keys=True), r["pass"])
def judge_times(tables):
    times = {}
    for t in tables:
        for r in t["rows"]:
            for c in r["timings"]:
                times.setdefault(key(r), {}).setdefault(c["candidate"], []).append(c["seconds"])
    return {k: {c: statistics.median(v) for c, v in d.items()} for k, d in times.items()}
def score(t, judge):
    within, cost, best = 0, 0.0, 0.0
    for r in t["rows"]:
        j = judge[key(r)]
        fastest = min(j.values())
        chosen = j.get(r["chosen"], float("inf"))
        within += chosen <= 1.05 * fastest
        cost += chosen; best += fastest
    return within, cost / best - 1
full = judge_times(pooled)
for arm, tables in (("root", root), ("pooled", pooled)):
    res = []
    for i, t in enumerate(tables):
        judge = full if arm == "root" else judge_times(pooled[:i] + pooled[i + 1:])
        res.append(score(t, judge))
    w = [x[0] for x in res]; c = [x[1] for x in res]
    n = len(tables[0]["rows"])
    print(f"{tag} {arm:6s}: {len(tables)} runs, passes within 5 % of {n}: median {statistics.median(w)}, "
          f"range {min(w)}-{max(w)}, mean {statistics.mean(w):.1f}; summed cost median "
          f"{100*statistics.median(c):+.1f} %, worst {100*max(c):+.1f} %; measure s median "
          f"{statistics.median(t['measure_seconds'] for t in tables):.2f}")
