#!/usr/bin/python3
"""nostrum-train's bad input: clear errors naming the option, the file or the tensor, non-zero exit,
for unknown and invalid options, options another option makes ignored, a missing dataset, and
weights whose classes do not match the data."""
import json
import os
import subprocess
import tempfile

from e2e_common import ROOT, build_dir, check, fmnist_subset, mpirun, train_binary


def run_plain(args):
    proc = subprocess.run([train_binary()] + args, capture_output=True, text=True, timeout=300)
    print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
    return proc


def main():
    p = run_plain(["--data", "/nonexistent", "--frobnicate", "3"])
    check(p.returncode != 0 and "frobnicate" in p.stderr, "unknown option is rejected by name")

    p = run_plain(["--data", "/nonexistent", "--optimizer", "adam"])
    check(p.returncode != 0 and "--optimizer" in p.stderr and "sgd, lars" in p.stderr,
          "invalid choice names the option and the valid choices")

    p = run_plain(["--data", "/nonexistent", "--overlap", "sometimes"])
    check(p.returncode != 0 and "--overlap" in p.stderr and "auto, on, off" in p.stderr,
          "invalid --overlap names the valid choices")
    p = run_plain(["--data", "/nonexistent", "--model", "resnet9"])
    check(p.returncode != 0 and "--model" in p.stderr and "resnet50" in p.stderr,
          "unknown model lists the valid models")

    p = run_plain(["--data", "/nonexistent", "--batch-size", "0"])
    check(p.returncode != 0 and "--batch-size" in p.stderr, "non-positive batch size is rejected")

    # An option that another makes ignored is refused, naming both (src/train/resolve.cpp).
    for args, option, other in [(["--sync-bn-group", "2"], "--sync-bn-group", "--sync-bn"),
                                (["--keep-checkpoints", "5"], "--keep-checkpoints", "--checkpoint-dir"),
                                (["--lars-eta", "0.002"], "--lars-eta", "--optimizer"),
                                (["--lr-schedule", "cosine", "--poly-power", "3"], "--poly-power",
                                 "--lr-schedule")]:
        p = run_plain(["--data", "/nonexistent"] + args)
        check(p.returncode == 1 and option in p.stderr and other in p.stderr,
              f"{option} where {other} ignores it is refused naming both")

    p = run_plain(["--model", "resnet8"])
    check(p.returncode != 0 and "data" in p.stderr, "missing --data is reported")

    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, "bad.ini")
        open(config, "w").write("epochs = 3\nlearning-rate = 0.1\n")
        p = run_plain(["--data", "/nonexistent", "--config", config])
        check(p.returncode != 0 and "learning-rate" in p.stderr, "unknown key in a config file is rejected")

    p = run_plain(["--data", "/nonexistent/fmnist"])
    check(p.returncode != 0 and "/nonexistent/fmnist" in p.stderr, "missing dataset names the path")

    # A bad NOSTRUM_HUGE_PAGES stops the run, naming the variable.
    data = fmnist_subset(256, 64)
    proc = subprocess.run([train_binary(), "--data", data, "--model", "resnet8", "--width", "8",
                           "--batch-size", "8", "--epochs", "1", "--threads", "1"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NOSTRUM_HUGE_PAGES="yes"))
    print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
    check(proc.returncode != 0 and "NOSTRUM_HUGE_PAGES='yes'" in proc.stderr,
          "a bad NOSTRUM_HUGE_PAGES is refused by name")

    p = run_plain(["--help"])
    check(p.returncode == 0 and "Optimisation" in p.stdout and "Parallelism" in p.stdout,
          "--help is grouped by topic")
    check("only with --sync-bn" in p.stdout and "only with --checkpoint-dir" in p.stdout,
          "--help marks the options refused without another")
    check("src/train/README.md" in p.stdout
          and os.path.isfile(os.path.join(ROOT, "src", "train", "README.md")),
          "--help names the options' reference, which exists")

    # --precision auto: rank 0's probes choose for every rank, the choice and both probe numbers are
    # printed and the result records the precision run (bf16 hidden, as on a CPU without it).
    data = fmnist_subset(1024, 256)
    with tempfile.TemporaryDirectory() as work:
        result = os.path.join(work, "result.json")
        env = dict(os.environ, NOSTRUM_CPU_NO_BF16="1")
        cmd = [os.path.join(ROOT, "tools", "mpirun"), "-n", "2", train_binary(), "--data", data,
               "--model", "resnet8", "--width", "8", "--batch-size", "16", "--max-steps", "2",
               "--threads", "1", "--precision", "auto", "--result-json", result]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        print(p.stdout[-3000:], p.stderr[-2000:], sep="\n")
        check("precision auto -> fp32: the CPU lacks AVX512" in p.stdout and "fp32 FMA probe" in p.stdout
              and "rank 0's probes decide for every rank" in p.stdout,
              "--precision auto prints its choice and the probes")
        check(os.path.exists(result) and json.load(open(result))["precision"] == "fp32",
              "--precision auto without bf16 runs and records fp32")
        # With --conv-kernel fixed no conv runs on AMX tiles: their probe is left out by name
        # (where the CPU has none, the line says so). Two steps stop short of the target: the
        # status is not checked.
        p = subprocess.run(cmd + ["--conv-kernel", "fixed"], capture_output=True, text=True,
                           timeout=300)
        print(p.stdout[-3000:], p.stderr[-2000:], sep="\n")
        check((
            "AMX tile probe not run (--conv-kernel fixed runs no kernel on AMX tiles)" in p.stdout
            or "AMX tile probe unavailable (no " in p.stdout),
              "--precision auto with --conv-kernel fixed leaves the AMX tile probe out")

    # Weights of a 1000-class model cannot start a 10-class run: the error names the tensor.
    data = fmnist_subset(4000, 1000)
    weights = os.path.join(build_dir(), "e2e-data", "resnet8-1000-classes.h5")
    conv = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "weights", "torch_to_h5.py"),
                           "--init-seed", "1", "--model", "resnet8", "--num-classes", "1000",
                           "--in-channels", "1", weights], capture_output=True, text=True)
    print(conv.stdout, conv.stderr)
    check(conv.returncode == 0, "made a 1000-class weights file")
    p = mpirun(2, ["--data", data, "--model", "resnet8", "--init-weights", weights,
                   "--epochs", "1", "--quiet"])
    check(p.returncode != 0 and "fc.weight" in p.stderr, "class mismatch names fc.weight")


if __name__ == "__main__":
    main()
