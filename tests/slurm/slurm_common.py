"""Shared helpers of the Slurm tests (tests/slurm/*_test.py): the build, the local cluster's
environment, a small real Fashion-MNIST subset, submitting and waiting with a timeout."""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import e2e_common  # noqa: E402  (fmnist_subset, check)

check = e2e_common.check
scaled = e2e_common.scaled


def build_dir():
    return os.environ["NOSTRUM_BUILD_DIR"]


def env(**extra):
    """The environment of a submission: the local site profile, the build's binary."""
    e = dict(os.environ)
    e.update(NOSTRUM_SITE=os.path.join(ROOT, "slurm", "sites", "local.env"),
             NOSTRUM_BIN=os.path.join(build_dir(), "src", "train", "nostrum-train"),
             NOSTRUM_SBATCH=os.path.join(ROOT, "slurm", "nostrum-train.sbatch"),
             NOSTRUM_JOBS=os.path.join(ROOT, "jobs"))
    e.update({k: str(v) for k, v in extra.items()})
    return e


def data():
    return e2e_common.fmnist_subset(2000, 500)


def work_dir(name):
    d = os.path.join(build_dir(), "slurm-tests", name)
    subprocess.run(["rm", "-rf", d], check=True)
    os.makedirs(d)
    return d


def submit(args, environment, cwd):
    proc = subprocess.run(["sbatch", "--parsable"] + args, env=environment, cwd=cwd,
                          capture_output=True, text=True)
    check(proc.returncode == 0, f"sbatch {' '.join(args[:6])} ... submitted ({proc.stderr.strip()})")
    return proc.stdout.strip().split(";")[0]


def wait(job_ids, timeout):
    """Waits until none of the jobs is queued or running; cancels them after timeout s (stretched by
    NOSTRUM_TEST_TIME_SCALE) and fails."""
    timeout = scaled(timeout)
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)],
                             capture_output=True, text=True).stdout.split()
        if not out:
            return
        time.sleep(1)
    subprocess.run(["scancel"] + job_ids)
    check(False, f"jobs {job_ids} done within {timeout} s")


def job_report(job_id, *files):
    """What Slurm says of a job (squeue's state and reason, scontrol show job, sinfo) and the tail
    of each file: printed when a test's wait for the job fails."""
    out = []
    for cmd in (["squeue", "-h", "-j", job_id, "-o", "%i %T %r %N"], ["scontrol", "show", "job", job_id],
                ["sinfo", "-N", "-h", "-o", "%N %T %E"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        out.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    for path in files:
        try:
            out.append(f"$ tail {path}\n{read(path)[-3000:]}")
        except OSError as e:
            out.append(f"{path}: {e.strerror}")
    return "\n".join(out)


def slurm_exit(job_id):
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
    m = re.search(r"JobState=(\S+).*?ExitCode=(\d+):", out, re.S)
    return (m.group(1), int(m.group(2))) if m else ("unknown", -1)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def probe_rows(run_dir):
    """The probe's rows of binding.txt: dicts of rank, node, host, cpus (a set), threads, address."""
    rows = re.findall(r"^rank (\d+) of \d+ on slurm node (\S+) \(host (.*)\) cpus (\S+) threads (\S+) address (\S+)$",
                      read(os.path.join(run_dir, "binding.txt")), re.M)
    return [{"rank": int(r), "node": n, "host": h, "cpus": cpu_set(c), "threads": t, "address": a}
            for r, n, h, c, t, a in sorted(rows, key=lambda x: int(x[0]))]


def cpu_set(text):
    """'0-2,5' -> {0, 1, 2, 5}."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def placement(run_dir):
    """'rank:node:threads ...' from the run directory's binding table (nostrum-mpi-probe); fails when
    two ranks of one node are bound to intersecting CPU sets (stacked on the same cores)."""
    rows = probe_rows(run_dir)
    for a in rows:
        for b in rows:
            if a["rank"] < b["rank"] and a["node"] == b["node"] and a["host"] == b["host"]:
                check(not a["cpus"] & b["cpus"], f"ranks {a['rank']} and {b['rank']} on {a['node']} have their own "
                      f"CPUs ({sorted(a['cpus'])} and {sorted(b['cpus'])})")
    return " ".join(f"{r['rank']}:{r['node']}:{r['threads']}" for r in rows)


def cluster_info():
    """The running cluster's cluster.env (slurm/local-cluster/cluster info) as a dict."""
    proc = subprocess.run([os.path.join(ROOT, "slurm", "local-cluster", "cluster"), "info"],
                          capture_output=True, text=True)
    check(proc.returncode == 0, f"cluster info ({proc.stderr.strip()})")
    return {k: v.strip('"') for k, v in (line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)}


def require_isolated():
    """Exit 77 (skipped) unless the cluster runs in the isolated mode."""
    info = cluster_info()
    if info.get("NOSTRUM_CLUSTER_MODE") != "isolated":
        print("SKIPPED: the local cluster runs in the shared mode here (no network namespaces or tc: see "
              "slurm_isolated_cluster_start's output), so there are no isolated nodes to test", flush=True)
        sys.exit(77)
    return info


def rank_pids(job_id, rank, restart_count):
    """Pids of nostrum-train processes of this job, MPI rank and attempt (SLURM_RESTART_COUNT)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if not f.read().split(b"\0")[0].endswith(b"nostrum-train"):
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = dict(item.split("=", 1) for item in f.read().decode(errors="replace").split("\0") if "=" in item)
        except OSError:
            continue
        if (environ.get("SLURM_JOB_ID") == job_id and environ.get("SLURM_RESTART_COUNT", "0") == str(restart_count)
                and environ.get("OMPI_COMM_WORLD_RANK", environ.get("SLURM_PROCID")) == str(rank)):
            found.append(int(pid))
    return found


def live_output(run_dir, rank=0):
    """What rank `rank` of the running attempt has written so far (mpirun's ranks/1/rank.N/), or ''."""
    text = ""
    for name in ("stdout", "stderr"):
        try:
            text += read(os.path.join(run_dir, "ranks", "1", f"rank.{rank}", name))
        except OSError:
            pass
    return text


# The line rank 0 prints when --debug-hold-at-step holds the ranks (until a stop signal)
HELD = "debug: holding before run step "


def wait_for_hold(job, run_dir, out, what="the ranks held by --debug-hold-at-step", marker=HELD, timeout=150):
    """Waits until rank 0 says the ranks are held (--debug-hold-at-step or --debug-hold-at-end)."""
    wait_for(what, lambda: marker in live_output(run_dir), timeout, lambda: job_report(job, out))


def wait_for(what, predicate, timeout, diagnose=None):
    """Polls predicate() until it returns something true; fails naming `what` after timeout s
    (after printing diagnose(), when given: what the cluster and the job say); timeout stretched by
    NOSTRUM_TEST_TIME_SCALE."""
    timeout = scaled(timeout)
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    if diagnose:
        print(diagnose(), flush=True)
    check(False, f"{what} within {timeout} s")
