"""Shared helpers of the end-to-end tests: paths, running nostrum-train under mpirun, a small real
Fashion-MNIST dataset made once per build directory."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def build_dir():
    return os.environ["NOSTRUM_BUILD_DIR"]


def train_binary():
    return os.path.join(build_dir(), "src", "train", "nostrum-train")


def shards_binary():
    return os.path.join(build_dir(), "tools", "shards", "nostrum-shards")


# Every run of one test script shares one conv kernel cache of its own (not the user's, not another
# test's): the runs of a test take the same kernels, tests running side by side do not meet. Set in
# the environment, so every nostrum-train a test starts (by mpirun or its own) inherits it.
CONV_CACHE_HOME = tempfile.mkdtemp(prefix="nostrum-e2e-cache-")
os.environ["XDG_CACHE_HOME"] = CONV_CACHE_HOME


def mpirun(ranks, args, timeout=600):
    cmd = [os.path.join(ROOT, "tools", "mpirun"), "-n", str(ranks), train_binary()] + args
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout))
    print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n", flush=True)
    return proc


def fmnist_subset(train=4000, test=1000):
    """A dataset of the first `train` / `test` images of the Debian package (made once)."""
    out = os.path.join(build_dir(), "e2e-data", f"fmnist-{train}-{test}")
    if os.path.exists(os.path.join(out, "manifest.txt")):
        return out
    idx = out + "-idx"
    subprocess.run([sys.executable, os.path.join(HERE, "make_fmnist_subset.py"), idx, str(train),
                    str(test)], check=True)
    subprocess.run([shards_binary(), "fashion-mnist", "-i", idx, "-o", out, "--overwrite", "-q"],
                   check=True)
    return out


def time_scale():
    """NOSTRUM_TEST_TIME_SCALE (default 1): how many times slower than usual this run's CPUs are
    (tools/test-slowed sets it). It stretches the tests' deadlines (how long to wait for a job, a
    line, a checkpoint), which guard against hangs; no test's outcome depends on them."""
    try:
        scale = float(os.environ.get("NOSTRUM_TEST_TIME_SCALE", "1"))
    except ValueError:
        scale = 0
    if scale < 1:
        print("FAILED: NOSTRUM_TEST_TIME_SCALE=%r: a number >= 1" % os.environ["NOSTRUM_TEST_TIME_SCALE"])
        sys.exit(1)
    return scale


def scaled(seconds):
    """A deadline of `seconds` on the usual machine, stretched by time_scale()."""
    return seconds * time_scale()


def check(condition, message):
    if not condition:
        print("FAILED: " + message, flush=True)
        sys.exit(1)
    print("ok: " + message, flush=True)
