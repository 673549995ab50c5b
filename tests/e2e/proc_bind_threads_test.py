#!/usr/bin/python3
"""--threads 0 means every core the rank may use, also under OMP_PROC_BIND: libgomp pins the initial
thread to the first place before main, and a rank given 2 cores used to start 1 thread. One rank
with OMP_PROC_BIND=close OMP_PLACES=cores must report as many threads as this process has CPUs, both
where the OpenBLAS kernels are kept and after the re-exec that switches them (forced with the test
variable NOSTRUM_TEST_FORCE_BLAS_REEXEC: it happens by itself only on CPUs OpenBLAS does not know)."""
import os
import re
import subprocess

from e2e_common import check, fmnist_subset, train_binary


def main():
    cpus = len(os.sched_getaffinity(0))
    data = fmnist_subset(4000, 1000)
    for blas, variable in (("kept", "NOSTRUM_KEEP_BLAS_KERNELS"),
                           ("switched by the re-exec", "NOSTRUM_TEST_FORCE_BLAS_REEXEC")):
        env = dict(os.environ, OMP_PROC_BIND="close", OMP_PLACES="cores", **{variable: "1"})
        for name in ("OMP_NUM_THREADS", "OPENBLAS_CORETYPE"):
            env.pop(name, None)
        proc = subprocess.run([train_binary(), "--data", data, "--model", "resnet8", "--width", "4",
                               "--batch-size", "16", "--epochs", "1", "--max-steps", "2",
                               "--threads", "0", "--loader-threads", "1"],
                              env=env, capture_output=True, text=True, timeout=300)
        print(f"--- BLAS kernels {blas}:", proc.stdout[-3000:], proc.stderr[-2000:], sep="\n")
        check(proc.returncode in (0, 2), f"nostrum-train runs (exit {proc.returncode})")
        check(f"1 rank(s) x {cpus} thread(s)" in proc.stdout,
              f"--threads 0 under OMP_PROC_BIND=close, BLAS kernels {blas}: {cpus} thread(s), "
              "one per CPU of the rank")
        if variable == "NOSTRUM_TEST_FORCE_BLAS_REEXEC":
            check(re.search(r"BLAS kernels (Haswell|SkylakeX)", proc.stdout) is not None,
                  "the re-exec ran (the kernels it switches to are in use)")
        check("\"steps\"" not in proc.stdout, "no stray JSON on stdout")


if __name__ == "__main__":
    main()
