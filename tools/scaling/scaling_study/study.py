"""A study directory (study.json, runs/nodes-N/ with each point's job.json, result.json, mllog.txt,
trace) read into one row per point: status, images/s, the time split per step, speedup and
efficiency; and the identity of the cluster and network a study ran on."""
import json
import os
import re
import socket
import subprocess

from .common import ScalingError, read_json


def mllog_value(path, key):
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(":::MLLOG ") and f'"key": "{key}"' in line:
                    return json.loads(line[9:])["value"]
    except OSError:
        pass
    return None


def slurm_state(job_id):
    """(state, exit code) from scontrol for a job that left no job.json (never ran its script)."""
    out = subprocess.run(["scontrol", "show", "job", str(job_id)], capture_output=True, text=True).stdout
    state = re.search(r"JobState=(\S+)", out)
    code = re.search(r"ExitCode=(\d+):", out)
    return (state.group(1) if state else "unknown"), (int(code.group(1)) if code else -1)


def cluster_identity(launcher, link):
    """Where measurements are made: the Slurm cluster's name (or this host for --local) and the
    link label the user gives (e.g. a tc profile). Predictions are compared with measurements only
    when both identities are equal."""
    if launcher == "local":
        cluster = "local:" + socket.gethostname()
    else:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
        m = re.search(r"^ClusterName\s*=\s*(\S+)", out, re.M)
        cluster = "slurm:" + (m.group(1) if m else "unknown")
    return {"cluster": cluster, "link": link or "unlabelled"}


def where_text(where):
    return f"{where['cluster']}, link {where['link']}" if where else "an unrecorded cluster"


RAN = ("completed", "budget_exhausted")  # the job script's statuses of a job that trained to its end


def _relocate(study, p):
    """A study directory that moved (or was committed): its run directories moved with it."""
    name = p["name"] if "name" in p else f"nodes-{p['nodes']}"
    for key, default in (("run_dir", os.path.join("runs", name)),
                         ("log", os.path.join("logs", os.path.basename(p.get("log", ""))))):
        inside = os.path.join(study, default)
        if p.get(key) and os.path.exists(inside):
            p[key] = inside


def _status(meta, p, job):
    status = job.get("status")
    exit_code = job.get("exit_code", p.get("exit_code"))
    if status is None:  # the script never wrote its state: ask Slurm
        if meta["launcher"] == "sbatch":
            status, exit_code = slurm_state(p.get("job_id", ""))
            status = "failed (" + status.lower() + ")"
        else:
            status = "failed"
    return status, exit_code


def _measured(row, p, result):
    split = result["time_split_s"]
    train_samples = mllog_value(os.path.join(p["run_dir"], "mllog.txt"), "train_samples")
    eval_samples = mllog_value(os.path.join(p["run_dir"], "mllog.txt"), "eval_samples")
    steps = result.get("steps") or (
        result["epochs"] * (train_samples // result["global_batch"]) if train_samples else 0)
    row.update(images_per_second=result["images_per_second"], epochs=result["epochs"], steps=steps,
               status_train=result["status"], final_accuracy=result["final_accuracy"],
               time_to_solution_s=result["time_to_solution_s"] if result["status"] == "success" else None,
               evaluation_s=split["evaluation"], evaluations=len(result.get("evals", [])),
               eval_samples=eval_samples, result=result)
    for key in ("compute", "exposed_allreduce", "hidden_allreduce", "data_wait"):
        row[key + "_ms"] = 1e3 * split[key] / steps if steps else None
    row["step_ms"] = row["compute_ms"] + row["exposed_allreduce_ms"] + row["data_wait_ms"] if steps else None
    row["global_batch"] = result["global_batch"]


def read_run(study, meta, p):
    _relocate(study, p)
    job = read_json(os.path.join(p["run_dir"], "job.json")) or {}
    result = read_json(os.path.join(p["run_dir"], "result.json"))
    row = {"nodes": p["nodes"], "ranks": p["ranks"], "threads_per_rank": p["threads_per_rank"],
           "global_batch": p["global_batch"], "local_batch": p["local_batch"],
           "job_id": p.get("job_id", ""), "run_dir": p["run_dir"], "log": p.get("log", "")}
    row["status"], row["exit_code"] = _status(meta, p, job)
    row["cpu_overlap"] = job.get("cpu_overlap", "")  # ranks that shared CPUs (the job script's job.json)
    row["ok"] = row["status"] in RAN and result is not None
    if row["ok"]:
        _measured(row, p, result)
    fillers = [dict(f) for f in p.get("fillers", [])]
    for f in fillers:
        _relocate(study, f)
    row["fillers"] = len(fillers)
    row["failed_fillers"] = [f["name"] for f in fillers
                             if (read_json(os.path.join(f["run_dir"], "job.json")) or {}).get("status") not in RAN]
    return row


def read_point(study, meta, p):
    """A point's row: its run, or of its repetitions the fastest (a failed one fails the point)."""
    runs = [read_run(study, meta, dict(p, **r)) for r in p.get("runs", [])] or [read_run(study, meta, p)]
    failed = [r for r in runs if not r["ok"]]
    if failed:
        return failed[0]
    best = max(runs, key=lambda r: r["images_per_second"])
    best["repetitions"] = [r["images_per_second"] for r in runs]
    return best


def collect(study):
    """(study.json's content, one row per point, one row per compute-sweep point)."""
    meta = read_json(os.path.join(study, "study.json"))
    if meta is None:
        raise ScalingError(f"{study}/study.json missing or unreadable: not a study directory")
    rows = [read_point(study, meta, p) for p in meta["points"]]
    sweep = [read_point(study, meta, p) for p in meta.get("compute_points", [])]
    base = next((r for r in rows if r["ok"]), None)
    for r in rows:
        if r["ok"] and base:
            r["speedup"] = r["images_per_second"] / base["images_per_second"]
            r["efficiency"] = r["speedup"] / (r["nodes"] / base["nodes"])
    return meta, rows, sweep
