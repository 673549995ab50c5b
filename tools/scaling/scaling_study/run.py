"""scaling-study run: one nostrum-train job per node count through slurm/nostrum-train.sbatch
(sbatch, each point after the previous one so points never share nodes or the network; or --local
with mpirun), then the report. Strong scaling keeps the smallest point's global batch and adds a
compute sweep: 1-node runs at each smaller local batch, so the model has compute measured at every
local batch it is asked about. --repeat K runs every point K times, alternating over the points;
the report takes each point's fastest repetition (on a shared machine the others were disturbed).
--fill-idle-nodes: where the cluster's nodes share one host (the local cluster), a point on fewer
nodes than the study's largest runs beside a 1-node copy of its job on each idle node, so that
every point computes beside as many busy neighbours (the copies' results are not used)."""
import os
import subprocess
import sys
import time

from .common import ROOT, ScalingError, job_value, write_json
from .study import cluster_identity


def find_sbatch_script():
    for path in (os.path.join(ROOT, "slurm", "nostrum-train.sbatch"),
                 os.path.join(ROOT, "share", "nostrum", "slurm", "nostrum-train.sbatch"),
                 os.environ.get("NOSTRUM_SBATCH", "")):
        if path and os.path.isfile(path):
            return path
    raise ScalingError("nostrum-train.sbatch not found (module load nostrum, or run from the repository)")


def plan_points(args):
    nodes = sorted({int(n) for n in args.nodes.split(",")})
    batch = args.batch_size or int(job_value(args.job, "batch-size") or 32)
    R = args.ranks_per_node
    points = []
    for n in nodes:
        ranks = n * R
        local = batch
        if args.mode == "strong":
            global_batch = batch * nodes[0] * R
            if global_batch % ranks:
                raise ScalingError(f"--nodes: strong scaling's global batch {global_batch} does not divide over {ranks} ranks")
            local = global_batch // ranks
        points.append({"nodes": n, "ranks": ranks, "ranks_per_node": R, "threads_per_rank": args.threads,
                       "local_batch": local, "global_batch": local * ranks, "name": f"nodes-{n}"})
    return points


def plan_compute_sweep(points):
    """1-node points at each local batch no 1-node point measures (strong scaling's smaller ones)."""
    measured = {p["local_batch"] for p in points if p["nodes"] == 1}
    out = []
    for p in points:
        b = p["local_batch"]
        if b not in measured:
            measured.add(b)
            out.append(dict(p, nodes=1, ranks=p["ranks_per_node"], global_batch=b * p["ranks_per_node"],
                            name=f"compute-batch-{b}"))
    return out


def point_args(args, point, extra_steps=0):
    extra = [a for a in args.extra if a != "--"]
    out = ["--config", os.path.abspath(args.job), "--data", os.path.abspath(args.data),
           "--batch-size", str(point["local_batch"]), "--threads", str(args.threads)]
    if args.epochs:
        out += ["--epochs", str(args.epochs)]
    if args.steps:  # a fixed number of steps per point: throughput, not time-to-solution
        out += ["--max-steps", str(args.steps + extra_steps)]
    return out + extra


def site_sbatch_env(site):
    """The SBATCH_* variables (account, partition, ...) a site profile sets, for sbatch itself."""
    out = subprocess.run(["bash", "-c", 'source "$1" >/dev/null 2>&1; env -0', "site", os.path.abspath(site)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise ScalingError(f"--site: cannot source the site profile {site}: {out.stderr.strip()}")
    pairs = (item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith("SBATCH_")}


def check_partition_size(nodes, env):
    """Refuses a study whose largest point asks for more nodes than the partition has: Slurm would
    keep that job pending for ever (PartitionNodeLimit)."""
    partition = env.get("SBATCH_PARTITION")
    cmd = ["sinfo", "-h", "-o", "%P %D"] + (["-p", partition] if partition else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise ScalingError(f"sinfo failed ({out.stderr.strip()}): is Slurm reachable (SLURM_CONF)?")
    sizes = {}
    for line in out.stdout.splitlines():
        name, count = line.split()
        if partition or name.endswith("*"):  # the named partition, else the default one
            sizes[name.rstrip("*")] = sizes.get(name.rstrip("*"), 0) + int(count)
    if sizes and nodes > max(sizes.values()):
        name, size = max(sizes.items(), key=lambda kv: kv[1])
        raise ScalingError(f"--nodes asks for {nodes} nodes, but partition {name} has {size}: that job would pend for ever")


def pending_reasons(job_ids):
    """{job id: reason} of the jobs still pending (squeue %r), e.g. Resources, Dependency."""
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i %r", "-j", ",".join(job_ids)],
                         capture_output=True, text=True).stdout
    return dict(line.split(None, 1) for line in out.splitlines() if " " in line)


def wait_for(job_ids, timeout):
    """Waits until none of the jobs is queued; prints a pending job's reason when it changes."""
    deadline = time.time() + timeout
    said = {}
    while time.time() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)],
                             capture_output=True, text=True).stdout.split()
        if not out:
            return True
        for job, reason in pending_reasons(job_ids).items():
            if said.get(job) != reason and reason not in ("Dependency", "None"):
                print(f"scaling-study: job {job} pending: {reason}", flush=True)
            said[job] = reason
        time.sleep(1)
    return False


def run_local(args, study, script, env, p, name):
    env = dict(env, NOSTRUM_LOCAL_RANKS=str(p["ranks"]), NOSTRUM_LOCAL_THREADS=str(args.threads),
               NOSTRUM_LOCAL_JOB_ID=f"local-{p['name']}", NOSTRUM_JOB_NAME=name)
    p["log"] = os.path.join(study, "logs", f"{p['name']}.out")
    p["job_id"] = f"local-{p['name']}"
    print(f"scaling-study: {p['name']}: {p['ranks']} rank(s) locally -> {p['log']}", flush=True)
    with open(p["log"], "w") as f:
        p["exit_code"] = subprocess.run([script] + p["args"], env=env, stdout=f, stderr=subprocess.STDOUT).returncode


def filler_points(args, p, total_nodes, rep_name):
    """1-node copies of point p's job for the nodes it leaves idle (--fill-idle-nodes), each with
    two more steps than p so that p never runs its last steps beside an idle node."""
    if not args.fill_idle_nodes or p["nodes"] >= total_nodes:
        return []
    out = []
    for k in range(total_nodes - p["nodes"]):
        f = dict(p, nodes=1, ranks=args.ranks_per_node, global_batch=p["local_batch"] * args.ranks_per_node,
                 name=f"{rep_name}-filler{k + 1}")
        f["args"] = point_args(args, f, extra_steps=2)
        out.append(f)
    return out


def submit(args, study, script, env, p, name, previous):
    cmd = ["sbatch", "--parsable", "-N", str(p["nodes"]), f"--ntasks-per-node={args.ranks_per_node}",
           f"--cpus-per-task={args.threads}", "-J", f"{name}-{p['name']}",
           "-o", os.path.join(study, "logs", f"{p['name']}-%j.out")]
    if args.time_limit:
        cmd += ["-t", args.time_limit]
    if args.exclusive:
        cmd.append("--exclusive")
    if previous and not args.parallel:
        cmd.append(f"--dependency=afterany:{previous}")
    result = subprocess.run(cmd + [script] + p["args"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise ScalingError(f"sbatch failed for {p['name']}: {result.stderr.strip()}")
    p["job_id"] = result.stdout.strip().split(";")[0]
    p["log"] = os.path.join(study, "logs", f"{p['name']}-{p['job_id']}.out")
    print(f"scaling-study: {p['name']}: {p['nodes']} node(s) x {args.ranks_per_node} rank(s) x {args.threads} "
          f"thread(s), global batch {p['global_batch']}: job {p['job_id']}", flush=True)
    return p["job_id"]


def run(args, report):
    if not args.job or not args.data or not args.nodes:
        raise ScalingError("run needs --job, --data and --nodes")
    study = os.path.abspath(args.study or os.path.join(
        "runs", "scaling-" + os.path.splitext(os.path.basename(args.job))[0] + "-" + args.mode))
    os.makedirs(os.path.join(study, "logs"), exist_ok=True)
    script = find_sbatch_script()
    points = plan_points(args)
    sweep = [] if args.no_compute_sweep else plan_compute_sweep(points)
    env = dict(os.environ)
    if args.site and not os.path.isfile(args.site):
        raise ScalingError(f"--site {args.site}: no such site profile (see slurm/sites/, or $NOSTRUM_SITES with the module)")
    if args.site:
        env["NOSTRUM_SITE"] = os.path.abspath(args.site)
        env.update(site_sbatch_env(args.site))
    total_nodes = max(p["nodes"] for p in points)
    if args.fill_idle_nodes and args.local:
        raise ScalingError("--fill-idle-nodes fills idle Slurm nodes: not with --local")
    if args.fill_idle_nodes and args.parallel:
        raise ScalingError("--fill-idle-nodes needs the points one after another: not with --parallel")
    if not args.local:
        check_partition_size(total_nodes, env)
    if args.trace:
        env["NOSTRUM_TRACE"] = "1"
    name = os.path.splitext(os.path.basename(args.job))[0]
    previous = None
    for rep in range(args.repeat):  # repetitions alternate over the points: 1, 2, ..., 1, 2, ...
        for p in sweep + points:
            r = dict(p, name=p["name"] + (f"-rep{rep + 1}" if args.repeat > 1 else ""))
            r["run_dir"] = os.path.join(study, "runs", r["name"])
            r["args"] = point_args(args, r)
            env_point = dict(env, NOSTRUM_RUN_DIR=r["run_dir"])
            if args.local:
                run_local(args, study, script, env_point, r, name)
            else:
                fillers = filler_points(args, p, total_nodes, r["name"])
                for f in fillers:  # each beside the point: the same dependency, started with it
                    f["run_dir"] = os.path.join(study, "runs", f["name"])
                    submit(args, study, script, dict(env, NOSTRUM_RUN_DIR=f["run_dir"]), f, name, previous)
                previous = ":".join([submit(args, study, script, env_point, r, name, previous)]
                                    + [f["job_id"] for f in fillers])
                r["fillers"] = [{k: f.get(k) for k in ("name", "run_dir", "job_id", "log")} for f in fillers]
            p.setdefault("runs", []).append({k: r.get(k) for k in ("name", "run_dir", "job_id", "log", "exit_code",
                                                                   "fillers") if k in r})
            p.update(run_dir=p["runs"][0]["run_dir"], log=p["runs"][0]["log"], job_id=p["runs"][0]["job_id"],
                     args=r["args"])
    launcher = "local" if args.local else "sbatch"
    meta = {"job": os.path.abspath(args.job), "data": os.path.abspath(args.data), "mode": args.mode,
            "launcher": launcher, "site": args.site, "where": cluster_identity(launcher, args.link),
            "points": points, "compute_points": sweep, "fill_idle_nodes": bool(args.fill_idle_nodes)}
    write_json(os.path.join(study, "study.json"), meta)
    print(f"scaling-study: study in {study}", flush=True)
    if args.no_wait and not args.local:
        print(f"scaling-study: when the jobs are done: {sys.argv[0]} report {study}")
        return 0
    jobs = [j["job_id"] for p in sweep + points for r in p["runs"] for j in [r] + r.get("fillers", [])]
    if not args.local and not wait_for(jobs, args.timeout):
        reasons = pending_reasons(jobs)
        subprocess.run(["scancel"] + jobs)
        print(f"scaling-study: jobs not done after {args.timeout} s: cancelled"
              + "".join(f"; job {j} never ran (pending: {why})" for j, why in reasons.items()), file=sys.stderr)
    return report(study, args.network)
