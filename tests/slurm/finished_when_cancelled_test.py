#!/usr/bin/python3
"""A job whose ranks finished is reported as finished, even when the stop signal came as they did
(slurm/nostrum-train.sbatch on the real local Slurm cluster). Two 2-node jobs run with
--debug-hold-at-end: after rank 0 has written result.json and the time-to-solution line, every rank
holds until a stop signal, so the signal is certain to come after the end, on a machine of any
speed. The test then sends SIGTERM to each batch shell (`scancel --signal=TERM --batch`, as a site
epilogue or a preemption does); the script forwards it to mpirun, which exits 1 although its ranks
exit 0 or 2. The script must report what the ranks did: the job that reached its target completed
(job.json "completed", exit 0, Slurm COMPLETED 0), the one that spent its --max-steps budget
budget_exhausted (exit 2); job.json keeps the launcher's own status and the signal. (It reported
both as failed with exit 1, though result.json and the MLPerf log said otherwise.)"""
import os
import subprocess

from slurm_common import ROOT, check, data, env, read, read_json, slurm_exit, submit, wait, wait_for_hold, work_dir

TRAIN = ["--model", "resnet8", "--width", "8", "--batch-size", "32", "--seed", "3", "--progress-seconds", "1000",
         "--debug-hold-at-end"]
HELD_AT_END = "debug: holding after the run (status "


def start(work, name, train):
    job = submit(["-N", "2", "--ntasks-per-node=1", "-J", name, "-o", os.path.join(work, name + "-%j.out"),
                  os.path.join(ROOT, "slurm", "nostrum-train.sbatch"), "--data", data()] + TRAIN + train,
                 env(NOSTRUM_RUNS_DIR=os.path.join(work, "runs")), work)
    return job, os.path.join(work, "runs", f"{name}-{job}")


def check_reported(work, name, job, run_dir, want_status, want_result, want_exit, slurm_state):
    state, code = slurm_exit(job)
    log = read(os.path.join(work, f"{name}-{job}.out"))
    print(log[-2500:])
    status = read_json(os.path.join(run_dir, "job.json"))
    result = read_json(os.path.join(run_dir, "result.json"))
    print(status)
    check(result["status"] == want_result, f"{name}: the ranks' result.json says {want_result} ({result['status']})")
    check("got TERM, forwarding to the ranks" in log, f"{name}: the job script got SIGTERM after the end")
    check(status["signal"] == "TERM" and status["launcher_exit_code"] not in (0, 2, 3),
          f"{name}: mpirun exited non-zero after the signal (launcher_exit_code {status['launcher_exit_code']}), "
          "the case under test")
    check(status["status"] == want_status and status["exit_code"] == want_exit,
          f"{name}: job.json says what the ranks did: {want_status}, exit {want_exit} "
          f"({status['status']}, exit {status['exit_code']})")
    check(state == slurm_state and code == want_exit,
          f"{name}: the script's exit status follows it: Slurm {slurm_state} exit {want_exit} ({state}, exit {code})")
    check("but the ranks had finished" in log, f"{name}: the job log says why the launcher's status was overridden")
    check("nostrum-train exited with status" not in log, f"{name}: no failure reported")


def main():
    work = work_dir("finished-when-cancelled")
    done, done_dir = start(work, "done", ["--epochs", "6", "--target-accuracy", "0.3"])
    spent, spent_dir = start(work, "spent", ["--epochs", "6", "--max-steps", "12", "--target-accuracy", "0.99"])
    for name, job, run_dir in (("done", done, done_dir), ("spent", spent, spent_dir)):
        wait_for_hold(job, run_dir, os.path.join(work, f"{name}-{job}.out"), "the ranks held after the run",
                      HELD_AT_END)
        subprocess.run(["scancel", "--signal=TERM", "--batch", job], check=True)
        print(f"{name}: sent SIGTERM to job {job}'s batch shell after its ranks finished", flush=True)
    wait([done, spent], 120)
    check_reported(work, "done", done, done_dir, "completed", "success", 0, "COMPLETED")
    check_reported(work, "spent", spent, spent_dir, "budget_exhausted", "aborted", 2, "FAILED")
    print("slurm_finished_when_cancelled: passed")


if __name__ == "__main__":
    main()
