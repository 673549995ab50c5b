#!/usr/bin/python3
"""Preemption end to end on the real local Slurm cluster with the real nostrum-train: a 2-node job
(slurm/nostrum-train.sbatch, --requeue) trains with --checkpoint-dir and --resume; SIGUSR1 to the
batch shell (what `#SBATCH --signal=B:USR1@120` sends) goes through mpirun to the ranks, which
finish the step, write a checkpoint and exit 3; the script requeues the job; the restarted job
(same command line) resumes from the checkpoint, reaches the target, and its MLPerf log, continued
across the restart, passes tools/mlperf/check_log.py."""
import glob
import os
import subprocess
import time

from slurm_common import ROOT, check, data, env, read, read_json, slurm_exit, submit, wait, work_dir


def main():
    work = work_dir("checkpoint-requeue")
    runs = os.path.join(work, "runs")
    ck = os.path.join(work, "checkpoints")
    e = env(NOSTRUM_RUNS_DIR=runs)
    job = submit(["-N", "2", "--ntasks-per-node=1", "--requeue", "--open-mode=append", "-J", "ckpt",
                  "-o", os.path.join(work, "ckpt-%j.out"), os.path.join(ROOT, "slurm", "nostrum-train.sbatch"),
                  "--data", data(), "--model", "resnet8", "--width", "8", "--batch-size", "32",
                  "--epochs", "6", "--target-accuracy", "0.3", "--seed", "3", "--progress-seconds", "1000",
                  "--checkpoint-dir", ck, "--resume"], e, work)
    deadline = time.time() + 120
    while not glob.glob(os.path.join(ck, "checkpoint-*.h5")) and time.time() < deadline:
        time.sleep(0.2)
    check(bool(glob.glob(os.path.join(ck, "checkpoint-*.h5"))), "the job trained and wrote its epoch-1 checkpoint")
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
    wait([job], 150)
    state, code = slurm_exit(job)
    log = read(os.path.join(work, f"ckpt-{job}.out"))
    print(log[-3000:])
    run_dir = os.path.join(runs, f"ckpt-{job}")
    status = read_json(os.path.join(run_dir, "job.json"))
    rank0 = read(os.path.join(run_dir, "ranks", "rank.0.out"))
    print(rank0[-3000:])
    check("checkpoint (stop signal)" in rank0 + log, "the ranks checkpointed after SIGUSR1")
    check("requeueing job" in log, "exit 3 requeued the job")
    check("resumed from " in rank0 + log, "the restarted job resumed from the checkpoint")
    check(state == "COMPLETED" and code == 0 and status["status"] == "completed" and status["restart_count"] == 1,
          f"the restarted job reached the target ({state}, exit {code}, {status})")
    mllog = os.path.join(run_dir, "mllog.txt")
    proc = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "mlperf", "check_log.py"), mllog,
                           "--accuracy-target", "0.3"], capture_output=True, text=True)
    print(proc.stdout[-1500:])
    check(proc.returncode == 0, "the MLPerf log, continued across the requeue, passes the checker")
    print("slurm_checkpoint_requeue: passed")


if __name__ == "__main__":
    main()
