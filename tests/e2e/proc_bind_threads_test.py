#!/usr/bin/python3
"""--threads 0 means every core the rank may use, also under OMP_PROC_BIND: libgomp pins the initial
thread to the first place before main, and a rank given 2 cores used to start 1 thread. One rank
with OMP_PROC_BIND=close OMP_PLACES=cores must report as many threads as this process has CPUs."""
import os
import subprocess

from e2e_common import check, fmnist_subset, train_binary


def main():
    cpus = len(os.sched_getaffinity(0))
    data = fmnist_subset(4000, 1000)
    env = dict(os.environ, OMP_PROC_BIND="close", OMP_PLACES="cores", NOSTRUM_KEEP_BLAS_KERNELS="1")
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run([train_binary(), "--data", data, "--model", "resnet8", "--width", "4",
                           "--batch-size", "16", "--epochs", "1", "--max-steps", "2",
                           "--threads", "0", "--loader-threads", "1"],
                          env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n")
    check(proc.returncode in (0, 2), f"nostrum-train runs (exit {proc.returncode})")
    check(f"1 rank(s) x {cpus} thread(s)" in proc.stdout,
          f"--threads 0 under OMP_PROC_BIND=close starts {cpus} thread(s), one per CPU of the rank")
    check("\"steps\"" not in proc.stdout, "no stray JSON on stdout")


if __name__ == "__main__":
    main()
