"""The OpenBLAS environment a benchmark command runs with (shared by the bench scripts).

"avx512": OPENBLAS_L2_SIZE unset and, on a CPU with AVX-512, OPENBLAS_CORETYPE=SkylakeX: OpenBLAS
0.3.21 detects AMD Zen 4 as Cooperlake by itself but falls back to Prescott (SSE3) on Intel CPUs newer
than it knows (e.g. family 6 model 207), so the core is named rather than left to detection.
"env": the environment exactly as it is (the tests' setting).
"""
import os


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


def blas_env(mode):
    env = dict(os.environ)
    if mode == "avx512":
        env.pop("OPENBLAS_L2_SIZE", None)
        env.pop("OPENBLAS_CORETYPE", None)
        if cpu_has_avx512():
            env["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif mode != "env":
        raise ValueError(f"unknown BLAS mode {mode!r}: use avx512 or env")
    return env
