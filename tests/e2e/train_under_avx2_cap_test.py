#!/usr/bin/python3
"""End to end under NOSTRUM_MAX_ISA=avx2: 2 MPI ranks train ResNet-8 on the Fashion-MNIST subset of
train_to_target_test.py to the same target with the AVX-512 kernels capped away. The start-up line
and the result JSON name the cap and what it cleared, OpenBLAS runs its Haswell kernels (switched by
re-exec), oneDNN is told AVX2 and no kernel dispatch ran an AVX-512 variant. An unknown cap stops
the run before any work, naming the variable and the accepted values."""
import json
import os
import subprocess
import tempfile

from e2e_common import ROOT, check, fmnist_subset, train_binary


def run(ranks, args, env, timeout=600):
    cmd = [os.path.join(ROOT, "tools", "mpirun"), "-n", str(ranks), train_binary()] + args
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n", flush=True)
    return proc


def main():
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "NOSTRUM_KEEP_BLAS_KERNELS", "DNNL_MAX_CPU_ISA")}
    env["NOSTRUM_MAX_ISA"] = "avx2"
    data = fmnist_subset(4000, 1000)
    work = tempfile.mkdtemp(prefix="nostrum-e2e-avx2-")
    result = os.path.join(work, "result.json")
    target = 0.70
    # --conv-kernel fixed: one trajectory, whatever a measurement on a busy host would pick.
    proc = run(2, ["--conv-kernel", "fixed",
                   "--data", data, "--model", "resnet8", "--width", "8", "--batch-size", "32",
                   "--epochs", "4", "--target-accuracy", str(target), "--optimizer", "sgd",
                   "--lr", "0.1", "--warmup-epochs", "0", "--weight-decay", "0.0002",
                   "--result-json", result, "--threads", "1", "--loader-threads", "1"], env)
    check(proc.returncode == 0, f"nostrum-train exits 0 under NOSTRUM_MAX_ISA=avx2 (got {proc.returncode})")
    startup = [line for line in proc.stdout.splitlines() if "BLAS kernels" in line]
    check(len(startup) == 1 and "BLAS kernels Haswell" in startup[0]
          and "NOSTRUM_MAX_ISA=avx2" in startup[0] and "DNNL_MAX_CPU_ISA=AVX2" in startup[0],
          f"the start-up line names the Haswell kernels, the cap and oneDNN's ({startup})")
    r = json.load(open(result))
    check(r["status"] == "success", "result status is success")
    check(r["final_accuracy"] >= target, f"final accuracy {r['final_accuracy']} >= {target}")
    cpu = r["cpu"]
    check(cpu["max_isa"] == "avx2" and "NOSTRUM_MAX_ISA=avx2" in cpu["features"],
          f"the result records the cap ({cpu['max_isa']!r}, {cpu['features']!r})")
    check(cpu["openblas_core"] == "Haswell", f"OpenBLAS ran Haswell ({cpu['openblas_core']!r})")
    check(cpu["dnnl_max_cpu_isa"] == "AVX2", f"oneDNN was capped at AVX2 ({cpu['dnnl_max_cpu_isa']!r})")
    check("batch_norm_rows=avx2" in cpu["kernels_ran"] and "avx512" not in cpu["kernels_ran"],
          f"the kernels ran AVX2 variants and no AVX-512 one ({cpu['kernels_ran']!r})")
    with open("/proc/cpuinfo") as f:
        avx512 = " avx512f " in f.read()
    if avx512:  # the cap took something away here
        check("avx512f" in cpu["cap_removed"], f"the cap cleared AVX-512 ({cpu['cap_removed']!r})")

    env["NOSTRUM_MAX_ISA"] = "avx1024"
    proc = run(2, ["--data", data, "--model", "resnet8", "--max-steps", "1"], env, timeout=120)
    out = proc.stdout + proc.stderr
    check(proc.returncode == 1 and "NOSTRUM_MAX_ISA" in out and "'avx1024'" in out
          and "avx2, avx512, avx512_bf16 or amx" in out,
          f"an unknown cap stops the run naming the variable and the accepted values ({proc.returncode})")
    check(out.count("unknown NOSTRUM_MAX_ISA value") == 1, "rank 0 alone reports it")


if __name__ == "__main__":
    main()
