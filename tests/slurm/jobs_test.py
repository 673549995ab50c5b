#!/usr/bin/python3
"""The job scripts on the real local Slurm cluster (a CTest fixture starts and stops it): the
Fashion-MNIST job on 4 nodes x 1 rank x 2 threads and on 2 nodes x 2 ranks with node-local staging,
a job with a bad option, a launcher that does not match the MPI, and the MLPerf set (a job array of
5 seeds and the dependent scorer), and the README's route: a job submitted from the repository root
with none of NOSTRUM_BIN, NOSTRUM_SBATCH, NOSTRUM_JOBS set (the scripts find them themselves). Each
run directory is checked: exit status, MLPerf log (the compliance checker), result JSON, rank outputs,
command, environment, binding (ranks of one node on their own CPUs; ranks sharing CPUs reported in
job.json), nodes, version; a shape that changes the recipe's global batch is warned about."""
import os
import subprocess

from slurm_common import (ROOT, build_dir, check, data, env, placement, read, read_json, slurm_exit, submit,
                          wait, work_dir)

JOB = os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.sbatch")
SHORT = ["--epochs", "1", "--target-accuracy", "0.3"]


def check_run_dir(run_dir, ranks, expected_placement, threads):
    job = read_json(os.path.join(run_dir, "job.json"))
    check(job["status"] == "completed" and job["exit_code"] == 0, f"{run_dir}: job.json completed, exit 0")
    result = read_json(os.path.join(run_dir, "result.json"))
    check(result["status"] == "success" and result["ranks"] == ranks and result["threads_per_rank"] == threads,
          f"{run_dir}: result.json success on {ranks} ranks x {threads} threads ({result['status']}, "
          f"{result['ranks']} x {result['threads_per_rank']})")
    checker = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "mlperf", "check_log.py"),
                              "--accuracy-target", "0.3", os.path.join(run_dir, "mllog.txt")],
                             capture_output=True, text=True)
    check(checker.returncode == 0, f"{run_dir}: MLPerf log passes the checker ({checker.stdout[-300:]})")
    check(os.path.getsize(os.path.join(run_dir, "ranks", "rank.0.out")) > 0, "rank 0's output")
    for r in range(1, ranks):  # the other ranks print only warnings and errors
        check(os.path.exists(os.path.join(run_dir, "ranks", f"rank.{r}.out")), f"rank {r}'s output file")
    check("nostrum-train" in read(os.path.join(run_dir, "command.sh")), "command.sh holds the command")
    environment = read(os.path.join(run_dir, "environment.txt"))
    check(f"OMP_NUM_THREADS={threads}" in environment and "SLURM_JOB_ID=" in environment
          and "OMP_PROC_BIND=close" in environment, "environment.txt holds OMP_* and SLURM_*")
    nodes = read(os.path.join(run_dir, "nodes.txt")).split()
    check(len(nodes) == job["nodes"], f"nodes.txt lists {job['nodes']} nodes: {nodes}")
    check("nostrum 0.1" in read(os.path.join(run_dir, "version.txt")) and "(git " in
          read(os.path.join(run_dir, "version.txt")), "version.txt: version and commit")
    got = placement(run_dir)
    check(got == expected_placement, f"placement {got!r} == {expected_placement!r}")


def main():
    work = work_dir("jobs")
    shards = data()
    runs = os.path.join(work, "runs")
    e = env(NOSTRUM_DATA=shards, NOSTRUM_RUNS_DIR=runs)
    out = lambda name: ["-o", os.path.join(work, name + "-%j.out")]  # noqa: E731
    a = submit(["-N", "4", "--ntasks-per-node=1", "--cpus-per-task=2"] + out("a") + [JOB] + SHORT, e, work)
    stage = os.path.join(work, "node-local")
    b = submit(["-N", "2", "--ntasks-per-node=2", "--cpus-per-task=1"] + out("b") + [JOB] + SHORT,
               env(NOSTRUM_DATA=shards, NOSTRUM_RUNS_DIR=runs, NOSTRUM_STAGE_DIR=stage), work)
    c = submit(["-N", "1"] + out("c") + [JOB, "--no-such-option", "1"], e, work)
    d = submit(["-N", "2", "--ntasks-per-node=1"] + out("d") + [JOB] + SHORT,
               env(NOSTRUM_DATA=shards, NOSTRUM_RUNS_DIR=runs, NOSTRUM_LAUNCHER="srun",
                   NOSTRUM_SRUN_ARGS="--mpi=none"), work)
    user_env = {k: v for k, v in os.environ.items() if k not in ("NOSTRUM_BIN", "NOSTRUM_SBATCH", "NOSTRUM_JOBS")}
    user_env.update(NOSTRUM_SITE="slurm/sites/local.env", NOSTRUM_DATA=shards, NOSTRUM_RUNS_DIR=runs)
    from_root = os.path.realpath(build_dir()) == os.path.realpath(os.path.join(ROOT, "build"))
    if from_root:  # the README's route needs the build in <repository>/build
        e_job = submit(["-N", "1", "--ntasks-per-node=1", "-o", os.path.join(work, "e-%j.out"),
                        "jobs/fashion_mnist_resnet8.sbatch"] + SHORT, user_env, ROOT)
    mlperf = subprocess.run([os.path.join(ROOT, "jobs", "mlperf-set"), JOB, "-N", "1", "--ntasks-per-node=1",
                             "--"] + SHORT, env=env(NOSTRUM_DATA=shards, NOSTRUM_RUNS_DIR=runs,
                                                    NOSTRUM_ACCURACY_TARGET="0.3"),
                            cwd=work, capture_output=True, text=True)
    check(mlperf.returncode == 0, f"jobs/mlperf-set submitted: {mlperf.stdout.strip()} {mlperf.stderr.strip()}")
    array, scorer = mlperf.stdout.split()[1], mlperf.stdout.split()[5].rstrip(":")
    wait([a, b, c, d, array, scorer] + ([e_job] if from_root else []), 200)

    check_run_dir(os.path.join(runs, f"fashion-mnist-{a}"), 4, "0:node1:2 1:node2:2 2:node3:2 3:node4:2", 2)
    run_b = os.path.join(runs, f"fashion-mnist-{b}")
    check_run_dir(run_b, 4, "0:node1:1 1:node1:1 2:node2:1 3:node2:1", 1)
    log_a = read(os.path.join(work, f"a-{a}.out"))
    check("global batch 64 = 4 rank(s) x 16 images" in log_a
          and "warning: global batch 64 differs from the recipe's 32" in log_a,
          "4 nodes x 1 rank: the job prints the global batch and warns that it is not the recipe's")
    overlap_a = read_json(os.path.join(runs, f"fashion-mnist-{a}", "job.json"))["cpu_overlap"]
    check("ranks 0,1,2,3 on CPU 0 of host" in overlap_a and "ranks share CPUs" in log_a,
          f"4 simulated nodes on one host's 2 cores: job.json and the log say the ranks share CPUs ({overlap_a!r})")
    check("staged" in read(os.path.join(run_b, "staging.txt"))
          and f"--data {stage}/nostrum-data-{b}" in read(os.path.join(run_b, "command.sh")),
          "job b trained from the node-local copy")
    check(not os.path.exists(os.path.join(stage, f"nostrum-data-{b}")), "the node-local copy was removed")

    state, code = slurm_exit(c)
    job_c = read_json(os.path.join(runs, f"fashion-mnist-{c}", "job.json"))
    log_c = read(os.path.join(work, f"c-{c}.out"))
    check(state == "FAILED" and code == 1 and job_c["status"] == "failed" and job_c["exit_code"] == 1,
          f"the bad option: Slurm says {state} exit {code}, job.json {job_c['status']} {job_c['exit_code']}")
    check("no-such-option" in log_c, "the bad option's job log names the option")

    state, code = slurm_exit(d)
    log_d = read(os.path.join(work, f"d-{d}.out"))
    check(state == "FAILED" and code == 20 and "MPI world size check failed" in log_d,
          f"a launcher that does not match the MPI is refused (exit {code}, {state})")
    job_d = read_json(os.path.join(runs, f"fashion-mnist-{d}", "job.json"))
    check(job_d["status"] == "failed" and job_d["exit_code"] == 20,
          f"job.json of the refused job says failed, exit 20 ({job_d['status']} {job_d['exit_code']})")

    if from_root:
        run_e = os.path.join(runs, f"fashion-mnist-{e_job}")
        check_run_dir(run_e, 1, f"0:{read(os.path.join(run_e, 'nodes.txt')).split()[0]}:1", 1)
        version_e = read(os.path.join(run_e, "version.txt"))
        check(f"binary: {os.path.join(ROOT, 'build', 'src', 'train', 'nostrum-train')}" in version_e,
              "submitted from the repository root with no NOSTRUM_BIN/SBATCH/JOBS: the job found build/'s binary")
    else:
        print(f"NOT CHECKED: the submission from the repository root (the build is {build_dir()}, not {ROOT}/build)")

    set_dir = os.path.join(runs, f"mlperf-set-{array}")
    score = read(os.path.join(set_dir, "score.txt"))
    state, code = slurm_exit(scorer)
    check(state == "COMPLETED" and code == 0, f"the MLPerf scorer job completed: {score.strip()}")
    seeds = sorted(read_json(os.path.join(runs, f"fashion-mnist-{array}_{s}", "result.json"))["seed"]
                   for s in range(1, 6))
    check(seeds == [1, 2, 3, 4, 5], f"the array ran seeds 1-5: {seeds}")
    check(read(os.path.join(set_dir, "check.txt")).count("SUCCESS") == 5, "all 5 logs pass the checker")
    print("slurm_jobs: passed")


if __name__ == "__main__":
    main()
