#!/usr/bin/python3
"""tools/scaling-study on the real local Slurm cluster: a strong-scaling study over 1, 2 and 4 nodes
(Fashion-MNIST subset, 1 epoch) with its compute sweep (1 node at local batches 16 and 8), its table
checked against each point's result.json, the PNGs non-trivial, the model's prediction listed but
not compared (the profile is of another network), the points whose ranks share CPUs (simulated nodes
on one host's cores) marked so in the table; then a study whose job fails (a bad option) is reported
as failed, with its log, and the report exits non-zero; a site profile that does not exist and more
nodes than the partition has are refused before anything is submitted."""
import csv
import os
import subprocess

from slurm_common import ROOT, check, data, env, read, read_json, scaled, work_dir

TOOL = os.path.join(ROOT, "tools", "scaling-study")
JOB = os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.ini")


def png_ok(path):
    with open(path, "rb") as f:
        head = f.read(8)
    return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10_000


def main():
    work = work_dir("scaling")
    shards = data()
    study = os.path.join(work, "strong")
    cmd = [TOOL, "--job", JOB, "--data", shards, "--nodes", "1,2,4", "--mode", "strong", "--batch-size", "32",
           "--epochs", "1", "--study", study, "--timeout", str(int(scaled(240))), "--trace", "--network", "marenostrum4", "--", "--target-accuracy", "0.3"]
    proc = subprocess.run(cmd, env=env(), cwd=work, capture_output=True, text=True)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    check(proc.returncode == 0, "the study over 1, 2, 4 nodes ran and reported")
    with open(os.path.join(study, "scaling.csv")) as f:
        rows = list(csv.DictReader(f))
    check([int(r["nodes"]) for r in rows] == [1, 2, 4], "one row per node count")
    base = None
    for r in rows:
        result = read_json(os.path.join(r["run_dir"], "result.json"))
        ips = float(r["images_per_second"])
        check(abs(ips - result["images_per_second"]) < 1e-6 * ips, f"{r['nodes']} node(s): images/s {ips} as in result.json")
        check(int(r["ranks"]) == result["ranks"] == int(r["nodes"]) and int(r["global_batch"]) == result["global_batch"] == 32,
              f"{r['nodes']} node(s): ranks and global batch 32 as in result.json (strong scaling)")
        base = base or ips
        check(abs(float(r["speedup"]) - ips / base) < 1e-6, "speedup = images/s over the 1-node point's")
        check(abs(float(r["efficiency"]) - ips / base / int(r["nodes"])) < 1e-6, "efficiency = speedup / nodes")
        tts = result["time_to_solution_s"]
        check(abs(float(r["time_to_solution_s"]) - tts) < 1e-6, "time-to-solution as in result.json")
        split = result["time_split_s"]
        steps = 2000 // 32
        check(abs(float(r["compute_ms"]) - 1e3 * split["compute"] / steps) < 1e-3
              and abs(float(r["exposed_allreduce_ms"]) - 1e3 * split["exposed_allreduce"] / steps) < 1e-3
              and abs(float(r["data_wait_ms"]) - 1e3 * split["data_wait"] / steps) < 1e-3,
              f"{r['nodes']} node(s): the time split per step from result.json")
    for png in ("throughput.png", "efficiency.png", "time_split.png"):
        check(png_ok(os.path.join(study, png)), f"{png} is a PNG of more than 10 kB")
    md = read(os.path.join(study, "scaling.md"))
    check("| 4 | 4 | 32 |" in md and "predicted" in md, "scaling.md holds the table and the model's prediction")
    check("Not compared with the measurements" in md,
          "a profile not calibrated on this cluster and link is not compared with the measurements")
    sweep = read_json(os.path.join(study, "study.json"))["compute_points"]
    check(sorted(p["local_batch"] for p in sweep) == [8, 16] and all(p["nodes"] == 1 for p in sweep),
          "the compute sweep measured 1 node at the smaller local batches 16 and 8")
    for p in sweep:
        result = read_json(os.path.join(p["run_dir"], "result.json"))
        check(result["global_batch"] == p["local_batch"] and sum(result["gradient_buckets"]["floats"]) == result["parameters"],
              f"compute sweep at batch {p['local_batch']}: ran, and its result.json holds the bucket plan")
    shared = [r for r in rows if r["cpu_overlap"]]
    check([int(r["nodes"]) for r in shared] == [2, 4] and md.count("**ranks share CPUs**") == 2
          and "ranks share CPUs" in proc.stderr,
          "the 2- and 4-node points (ranks on one host's 2 cores) are marked as sharing CPUs in the table and output")

    failed = os.path.join(work, "failing")
    proc = subprocess.run([TOOL, "--job", JOB, "--data", shards, "--nodes", "1,2", "--epochs", "1", "--study", failed,
                           "--timeout", str(int(scaled(60))), "--", "--no-such-option", "1"],
                          env=env(), cwd=work, capture_output=True, text=True)
    print(proc.stdout[-2000:], proc.stderr[-2000:])
    check(proc.returncode == 1, "a study whose jobs fail exits 1")
    check("FAILED" in proc.stderr and "no-such-option" in proc.stderr, "the failure and its log are printed")
    md = read(os.path.join(failed, "scaling.md"))
    check(md.count("**FAILED**") == 2 and "exit 1" in md, "scaling.md lists both points as FAILED with exit 1")
    check(png_ok(os.path.join(failed, "throughput.png")) or os.path.getsize(os.path.join(failed, "throughput.png")) > 5000,
          "the plots are still written (failed points marked)")
    check_refused_before_submitting(work, shards)
    print("slurm_scaling_study: passed")


def check_refused_before_submitting(work, shards):
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    for extra, message in ((["--site", "slurm/sites/nope.env"], "--site slurm/sites/nope.env: no such site profile"),
                           (["--nodes", "8"], "--nodes asks for 8 nodes, but partition main has 4")):
        args = [TOOL, "--job", JOB, "--data", shards, "--nodes", "1", "--epochs", "1",
                "--study", os.path.join(work, "refused")] + extra
        proc = subprocess.run(args, env=env(), cwd=ROOT, capture_output=True, text=True, timeout=scaled(60))
        print(proc.stderr.strip())
        check(proc.returncode == 2 and message in proc.stderr, f"refused before submitting: {message}")
    after = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    check(before == after, "nothing was submitted for the refused studies")


if __name__ == "__main__":
    main()
