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
    """Waits until none of the jobs is queued or running; cancels them on timeout (fails)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(job_ids)],
                             capture_output=True, text=True).stdout.split()
        if not out:
            return
        time.sleep(1)
    subprocess.run(["scancel"] + job_ids)
    check(False, f"jobs {job_ids} done within {timeout} s")


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


def placement(run_dir):
    """'rank:node:threads ...' from the run directory's binding table (nostrum-mpi-probe)."""
    found = re.findall(r"^rank (\d+) of \d+ on slurm node (\S+) \(host .*\) cpus \S+ threads (\S+)$",
                       read(os.path.join(run_dir, "binding.txt")), re.M)
    return " ".join(f"{r}:{n}:{t}" for r, n, t in sorted(found, key=lambda x: int(x[0])))
