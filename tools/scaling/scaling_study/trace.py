"""One rank's Chrome trace (nostrum-train --trace): forward and backward time per step, their spread
from step to step, and the time each gradient bucket was ready as a fraction of backward (the
"bucket ready" instants the communication thread records; only a run of more than one rank has
them)."""
import statistics

MIN_SPREAD_STEPS = 8  # fewer steps give no spread (the interquartile range of a handful is noise)
SPREAD_RUN_STEPS = MIN_SPREAD_STEPS + 2  # the steps a run needs: its first and last are left out

from .common import read_json


def _steps(events):
    steps, step, depth, opened = [], None, {"forward": 0, "backward": 0}, {}
    for e in events:
        cat, ph = e.get("cat"), e["ph"]
        if e.get("name") == "data wait" and ph in ("B", "X"):  # a step begins with its data wait
            step = {"forward": 0.0, "backward": 0.0, "bwd_start": None, "bwd_end": None, "ready": []}
            steps.append(step)
        if step is None:
            continue
        if cat in ("forward", "backward") and e.get("tid", 0) == 0:
            if ph == "X":  # a complete span
                step[cat] += e["dur"]
                if cat == "backward":
                    step["bwd_start"] = e["ts"] if step["bwd_start"] is None else min(step["bwd_start"], e["ts"])
                    step["bwd_end"] = max(step["bwd_end"] or 0, e["ts"] + e["dur"])
            elif ph == "B":
                if depth[cat] == 0:
                    opened[cat] = e["ts"]
                    if cat == "backward" and step["bwd_start"] is None:
                        step["bwd_start"] = e["ts"]
                depth[cat] += 1
            elif ph == "E" and depth[cat] > 0:
                depth[cat] -= 1
                if depth[cat] == 0:
                    step[cat] += e["ts"] - opened[cat]
                    if cat == "backward":
                        step["bwd_end"] = e["ts"]
        elif e.get("name") == "bucket ready" and ph == "i":
            step["ready"].append(e["ts"])
    return steps


def trace_profile(path):
    """{forward_ms, backward_ms (medians over the steps after the first), compute_spread (the robust
    standard deviation of forward + backward, interquartile range / 1.349, over their median; the
    last step left out, it holds the final evaluation; None under MIN_SPREAD_STEPS steps),
    ready_fractions (None without bucket events), steps} or None."""
    trace = read_json(path)
    if not trace or "traceEvents" not in trace:
        return None
    events = sorted((e for e in trace["traceEvents"] if e.get("ph") in ("B", "E", "i", "X")),
                    key=lambda e: e["ts"])
    steps = [s for s in _steps(events)[1:] if s["forward"] > 0 and s["backward"] > 0]  # step 1 warms up
    if not steps:
        return None
    # medians: the last step also holds the final evaluation's forward passes (a run with
    # --max-steps evaluates at its end), and a disturbed step would pull a mean
    out = {"forward_ms": statistics.median(s["forward"] for s in steps) / 1e3,
           "backward_ms": statistics.median(s["backward"] for s in steps) / 1e3,
           "compute_spread": None, "ready_fractions": None, "steps": len(steps)}
    compute = [s["forward"] + s["backward"] for s in steps[:-1]]
    if len(compute) >= MIN_SPREAD_STEPS:
        q1, _, q3 = statistics.quantiles(compute, n=4)
        out["compute_spread"] = (q3 - q1) / 1.349 / statistics.median(compute)
    counts = {len(s["ready"]) for s in steps}
    if len(counts) == 1 and counts.pop() > 0:
        fractions = []
        for k in range(len(steps[0]["ready"])):
            f = [(s["ready"][k] - s["bwd_start"]) / max(1e-9, s["bwd_end"] - s["bwd_start"]) for s in steps]
            fractions.append(min(1.0, max(0.0, sum(f) / len(f))))
        out["ready_fractions"] = fractions
    return out
