#!/usr/bin/python3
"""NOSTRUM_LAUNCHER=srun (srun --mpi=pmix) on 2 isolated nodes (slurm_isolated_cluster: each slurmd
has its own PMIxCliTmpDirBase): the job script's world-size check passes (one MPI world of 2 ranks,
one on each node) and the Fashion-MNIST job trains. Skipped (77) in the shared mode, where the
slurmd share one PMIx directory; the refusal of srun without PMIx is slurm_jobs' job d."""
import os

from slurm_common import (ROOT, check, data, env, probe_rows, read, read_json, require_isolated, slurm_exit,
                          submit, wait, work_dir)

JOB = os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.sbatch")


def main():
    require_isolated()
    work = work_dir("srun-pmix")
    runs = os.path.join(work, "runs")
    job = submit(["-N", "2", "-w", "node1,node2", "--ntasks-per-node=1", "--cpus-per-task=1",
                  "-o", os.path.join(work, "srun-%j.out"), JOB, "--max-steps", "30", "--target-accuracy", "0.05"],
                 env(NOSTRUM_DATA=data(), NOSTRUM_RUNS_DIR=runs, NOSTRUM_LAUNCHER="srun"), work)
    wait([job], 150)
    state, code = slurm_exit(job)
    log = read(os.path.join(work, f"srun-{job}.out"))
    print(log[-2500:])
    run_dir = os.path.join(runs, f"fashion-mnist-{job}")
    status = read_json(os.path.join(run_dir, "job.json"))
    check(state == "COMPLETED" and code == 0 and status["status"] == "completed" and status["launcher"] == "srun",
          f"the srun job trained ({state}, exit {code}, {status['status']}, launcher {status['launcher']})")
    check(read(os.path.join(run_dir, "command.sh")).startswith("srun --mpi=pmix "), "the ranks were started by srun --mpi=pmix")
    rows = probe_rows(run_dir)
    check([(r["rank"], r["node"]) for r in rows] == [(0, "node1"), (1, "node2")]
          and "MPI world size check failed" not in log,
          f"the world-size check passed: one world of 2 ranks, one per node ({rows})")
    result = read_json(os.path.join(run_dir, "result.json"))
    check(result["ranks"] == 2 and result["status"] == "success", f"result.json: 2 ranks, success ({result['status']})")
    for r in (0, 1):
        check(os.path.exists(os.path.join(run_dir, "ranks", f"rank.{r}.out")), f"rank {r}'s output (srun --output)")
    print("slurm_srun_pmix: passed")


if __name__ == "__main__":
    main()
