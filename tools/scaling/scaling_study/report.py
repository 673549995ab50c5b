"""scaling-study report: a study directory -> scaling.md, scaling.csv, throughput.png,
efficiency.png, time_split.png; with a network profile, the model's prediction of every point,
compared with the measurement only when the profile was calibrated on the same cluster and link
the study ran on. Exit 1 if a point failed (listed and marked, never left out)."""
import csv
import os
import sys

from .common import ScalingError, write_json
from .model import efficiency, predict_step
from .network import load_network, same_place
from .node import from_study
from .plots import plot_study
from .study import collect, where_text

COLUMNS = ["nodes", "ranks", "threads_per_rank", "global_batch", "local_batch", "status", "exit_code",
           "images_per_second", "speedup", "efficiency", "time_to_solution_s", "step_ms", "compute_ms",
           "exposed_allreduce_ms", "hidden_allreduce_ms", "data_wait_ms", "final_accuracy", "job_id",
           "run_dir", "cpu_overlap"]


def fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def predict_study(meta, rows, sweep, net):
    """The model's prediction of each point that ran (compute from the study's 1-node points)."""
    node = from_study(meta, rows, sweep)
    points = []
    for r in rows:
        if r["ok"]:
            try:
                points.append(predict_step(node, net, r["nodes"], r["local_batch"]))
            except ScalingError as e:  # e.g. a local batch no 1-node run measured
                points.append({"nodes": r["nodes"], "refused": str(e)})
    predicted = [p for p in points if "refused" not in p]
    for p in predicted:
        p["efficiency"] = efficiency(p, predicted[0])
    return {"network": net, "sources": node.sources, "points": points,
            "compared": same_place(net, meta), "where": meta.get("where")}


def write_csv(study, rows):
    with open(os.path.join(study, "scaling.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(["" if r.get(c) is None else r.get(c) for c in COLUMNS])


def log_text(r, study):
    """The failed point's log, or that it has none (a job cancelled while pending never wrote one)."""
    if r["log"] and os.path.exists(r["log"]):
        return f"log `{os.path.relpath(r['log'], study)}`"
    return "no log: the job never ran"


def point_line(r, study):
    if not r["ok"]:
        return (f"| {r['nodes']} | {r['ranks']} | {r['global_batch']} | - | - | - | - | - | - | - | - "
                f"| - | **FAILED** ({r['status']}, exit {r['exit_code']}; {log_text(r, study)}) |")
    status = r["status"] if r.get("status_train") != "success" else "reached target"
    if status == "budget_exhausted":
        status = "target not reached within the budget"
    if r.get("cpu_overlap"):
        status += f"; **ranks share CPUs** ({r['cpu_overlap']})"
    if r.get("fillers"):
        status += f"; beside {r['fillers']} node(s) running a copy of the job"
    if r.get("failed_fillers"):
        status += f"; **copies that failed: {', '.join(r['failed_fillers'])}** (neighbours partly idle)"
    if len(r.get("repetitions", [])) > 1:
        status += f" (fastest of {len(r['repetitions'])}: " + ", ".join(f"{v:.1f}" for v in r["repetitions"]) + ")"
    return (f"| {r['nodes']} | {r['ranks']} | {r['global_batch']} | {fmt(r['images_per_second'])} "
            f"| {fmt(r['speedup'], 2)} | {fmt(r['efficiency'], 2)} | {fmt(r['time_to_solution_s'])} "
            f"| {fmt(r['step_ms'])} | {fmt(r['compute_ms'])} | {fmt(r['exposed_allreduce_ms'])} "
            f"| {fmt(r['hidden_allreduce_ms'])} | {fmt(r['data_wait_ms'])} | {status} |")


def prediction_lines(prediction, rows):
    net = prediction["network"]
    lines = ["", f"Model ({net['name']}):", ""] + [f"- {k}: {v}" for k, v in prediction["sources"].items()]
    lines.append(f"- network: {net['name']} ({net.get('source') or net.get('description', 'no source given')})")
    if not prediction["compared"]:
        lines += ["", f"Not compared with the measurements: the profile is of "
                  f"{where_text(net['where']) if net.get('where') else 'another network'}, "
                  f"the study ran on {where_text(prediction['where'])}.", "",
                  "| nodes | predicted images/s | predicted efficiency | predicted exposed allreduce ms (of it the slowest rank) |",
                  "|---:|---:|---:|---:|"]
        lines += [f"| {p['nodes']} | {p['images_per_second']:.1f} | {p['efficiency']:.2f} | {1e3 * p['exposed_s']:.1f} "
                  f"({1e3 * p['straggler_s']:.1f}) |"
                  if "refused" not in p else f"| {p['nodes']} | refused: {p['refused']} | | |"
                  for p in prediction["points"]]
        return lines
    lines += ["", "| nodes | predicted images/s | measured | error | predicted exposed allreduce ms (of it the slowest rank) "
              "| measured |",
              "|---:|---:|---:|---:|---:|---:|"]
    by_nodes = {r["nodes"]: r for r in rows if r["ok"]}
    for p in prediction["points"]:
        if "refused" in p:
            lines.append(f"| {p['nodes']} | refused: {p['refused']} | | | | |")
            continue
        m = by_nodes[p["nodes"]]
        p["measured_images_per_second"] = m["images_per_second"]
        p["error"] = (p["images_per_second"] - m["images_per_second"]) / m["images_per_second"]
        lines.append(f"| {p['nodes']} | {p['images_per_second']:.1f} | {m['images_per_second']:.1f} "
                     f"| {100 * p['error']:+.1f} % | {1e3 * p['exposed_s']:.1f} ({1e3 * p['straggler_s']:.1f}) "
                     f"| {m['exposed_allreduce_ms']:.1f} |")
    return lines


def write_markdown(study, meta, rows, prediction):
    lines = [f"# Scaling study: {os.path.basename(meta['job'])}, {meta['mode']} scaling", "",
             f"Data `{os.path.basename(meta['data'])}`, launcher {meta['launcher']}, on {where_text(meta.get('where'))}. "
             "Speedup and efficiency against the smallest point that ran; times per training step (ms): compute, "
             "allreduce not hidden behind backward (exposed), allreduce hidden behind backward, waiting for data.", "",
             "| nodes | ranks | global batch | images/s | speedup | efficiency | time-to-solution s "
             "| step ms | compute | exposed allreduce | hidden allreduce | data wait | status |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [point_line(r, study) for r in rows]
    if prediction:
        lines += prediction_lines(prediction, rows)
    lines += ["", "Plots: `throughput.png`, `efficiency.png`, `time_split.png`.", ""]
    with open(os.path.join(study, "scaling.md"), "w") as f:
        f.write("\n".join(lines))


def print_failures(rows):
    for r in rows:
        if r.get("cpu_overlap"):
            print(f"scaling-study: warning: {r['nodes']} node(s): ranks share CPUs ({r['cpu_overlap']}): that point "
                  "measures oversubscribed cores, not this shape", file=sys.stderr)
        if r.get("failed_fillers"):
            print(f"scaling-study: warning: {r['nodes']} node(s): the copies of the job on its idle nodes failed "
                  f"({', '.join(r['failed_fillers'])}): that point ran beside idle nodes", file=sys.stderr)
        if r["ok"]:
            continue
        print(f"scaling-study: FAILED: {r['nodes']} node(s), job {r['job_id']}, status {r['status']}, "
              f"exit {r['exit_code']}: " + (f"log {r['log']}" if r["log"] and os.path.exists(r["log"])
                                            else "no log: the job never ran"), file=sys.stderr)
        try:
            with open(r["log"], errors="replace") as f:
                tail = f.read().splitlines()[-8:]
            print("\n".join("    " + t for t in tail), file=sys.stderr)
        except OSError:
            pass


def report_main(study, network=None):
    study = os.path.abspath(study)
    meta, rows, sweep = collect(study)
    prediction = None
    if network and any(r["ok"] for r in rows):
        prediction = predict_study(meta, rows, sweep, load_network(network))
    write_csv(study, rows)
    write_markdown(study, meta, rows, prediction)
    if prediction:
        write_json(os.path.join(study, "prediction.json"), prediction)
    plot_study(study, meta, rows, prediction if prediction and prediction["compared"] else None)
    with open(os.path.join(study, "scaling.md")) as f:
        print(f.read())
    print_failures(rows)
    print(f"scaling-study: wrote {study}/scaling.md, scaling.csv, throughput.png, efficiency.png, time_split.png")
    return 1 if any(not r["ok"] for r in rows) else 0
