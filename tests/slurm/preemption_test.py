#!/usr/bin/python3
"""The job script's side of preemption on the real local Slurm cluster: SIGUSR1 to the batch shell
(what `#SBATCH --signal=B:USR1@120` sends before the time limit) is forwarded through mpirun to the
ranks; a rank exiting with status 3 ("checkpointed, requeue me") gets the job requeued, and the
restarted job (SLURM_RESTART_COUNT 1) writes into the same run directory. nostrum-train is replaced
by tests/slurm/fake_train until it checkpoints on SIGUSR1 itself."""
import os
import subprocess
import time

from slurm_common import HERE, ROOT, build_dir, check, env, read, read_json, slurm_exit, submit, wait, work_dir


def main():
    work = work_dir("preemption")
    runs = os.path.join(work, "runs")
    e = env(NOSTRUM_RUNS_DIR=runs, NOSTRUM_BIN=os.path.join(HERE, "fake_train"),
            NOSTRUM_PROBE_BIN=os.path.join(build_dir(), "tools", "nostrum-mpi-probe"))
    job = submit(["-N", "2", "--ntasks-per-node=1", "--requeue", "--open-mode=append", "-J", "preempt",
                  "-o", os.path.join(work, "preempt-%j.out"), os.path.join(ROOT, "slurm", "nostrum-train.sbatch"),
                  "--data", "/nonexistent"], e, work)
    run_dir = os.path.join(runs, f"preempt-{job}")
    marker = os.path.join(run_dir, "fake_train.waiting")
    deadline = time.time() + 60
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.5)
    check(os.path.exists(marker), "the ranks started and wait for the signal")
    time.sleep(1)
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True)
    wait([job], 90)
    state, code = slurm_exit(job)
    log = read(os.path.join(work, f"preempt-{job}.out"))
    print(log[-2500:])
    status = read_json(os.path.join(run_dir, "job.json"))
    check("forwarding to the ranks" in log and "got SIGUSR1" in read(os.path.join(run_dir, "ranks", "rank.0.out"))
          + log, "SIGUSR1 reached the batch shell and the ranks")
    check("requeueing job" in log, "exit 3 requeued the job")
    check(state == "COMPLETED" and code == 0 and status["status"] == "completed" and status["restart_count"] == 1,
          f"the restarted job completed in the same run directory ({state}, exit {code}, {status})")
    print("slurm_preemption: passed")


if __name__ == "__main__":
    main()
