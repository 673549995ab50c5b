#!/usr/bin/env python3
"""Stall watchdog and rank failures under mpiexec -n 2 with nostrum-stall-drill.

usage: stall_test.py CASE DRILL MPIEXEC
  stop_rank1     SIGSTOP rank 1: the job ends within the stall timeout (+ slack), rank 1 named
  stop_rank0     SIGSTOP rank 0: rank 1 sees rank 0 silent and ends the job, rank 0 named
  hang_rank1     rank 1's main thread hangs (stuck in I/O; its heartbeats go on): rank 1 named
  kill_rank1     kill -9 of rank 1: the job ends non-zero within 60 s
  no_false_alarm steps slower than the heartbeat but faster than the timeout: the job completes
  suspend_all    SIGSTOP of every rank for longer than the timeout, then SIGCONT (a suspended job):
                 the job goes on and completes, no alarm. The drill holds before step 10 until the
                 test, after the SIGCONT, creates its --hold-file: the suspension (after "step 5")
                 is certain to come while the job runs, however fast its 20 ms steps go.
Times are bounded above only (generously: the machine may be loaded); the lower bound on detection
is the watchdog's own report of the timeout it applied.
Exits non-zero with the reason when an expectation fails.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT_S = 8.0  # --stall-timeout of the drill
# detection (1 heartbeat), MPI_Abort and mpirun's teardown on a loaded machine; stretched, like the
# deadlines below, by NOSTRUM_TEST_TIME_SCALE (tools/test-slowed)
SCALE = float(os.environ.get("NOSTRUM_TEST_TIME_SCALE", "1"))
SLACK_S = 40.0 * SCALE
HOLD_FILE = os.path.join(tempfile.mkdtemp(prefix="nostrum-stall-"), "go")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def suspend(pids, seconds):
    """Stops every rank (as Slurm's scontrol suspend does), waits, and lets them go on."""
    for pid in pids.values():
        os.kill(pid, signal.SIGSTOP)
    print(f"stopped every rank for {seconds} s")
    time.sleep(seconds)
    for pid in pids.values():
        os.kill(pid, signal.SIGCONT)


def run(case, drill, mpiexec):
    args = [mpiexec, "-n", "2", "--oversubscribe", drill, "--stall-timeout", str(TIMEOUT_S)]
    if case == "hang_rank1":
        args += ["--steps", "100000", "--hang-rank", "1", "--hang-at-step", "5"]
    elif case == "no_false_alarm":
        # Each step computes 1.5 s on rank 0 only... both ranks compute, 1.5 s > 1 s heartbeat.
        args += ["--steps", "6", "--compute-ms", "1500"]
    elif case == "suspend_all":
        args += ["--steps", "40", "--hold-at-step", "10", "--hold-file", HOLD_FILE]
    else:
        args += ["--steps", "100000"]
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids, out_lines, err_lines = {}, [], []
    signalled_at = [None]
    state = {"step": -1}

    def read_err():
        for line in proc.stderr:
            err_lines.append(line)

    threading.Thread(target=read_err, daemon=True).start()
    for line in proc.stdout:
        out_lines.append(line)
        m = re.match(r"rank (\d+) pid (\d+)", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
        m = re.match(r"step (\d+)", line)
        if m:
            state["step"] = int(m.group(1))
            if state["step"] == 5 and signalled_at[0] is None and case in (
                    "stop_rank1", "stop_rank0", "kill_rank1"):
                target = 0 if case == "stop_rank0" else 1
                sig = signal.SIGKILL if case == "kill_rank1" else signal.SIGSTOP
                os.kill(pids[target], sig)
                signalled_at[0] = time.monotonic()
                print(f"sent {sig.name} to rank {target} (pid {pids[target]}) after step 5")
            if case == "hang_rank1" and state["step"] == 5:
                signalled_at[0] = time.monotonic()
            if case == "suspend_all" and state["step"] == 5 and signalled_at[0] is None:
                suspend(pids, TIMEOUT_S + 4)
                signalled_at[0] = time.monotonic()
                open(HOLD_FILE, "w").close()  # let it go on past step 10
        if time.monotonic() - start > 150 * SCALE:
            break
    try:
        rc = proc.wait(timeout=max(1.0, 160 * SCALE - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()
        fail(f"the job was still running after {160 * SCALE:g} s: it hangs")
    ended = time.monotonic()
    stderr = "".join(err_lines)
    print(stderr[-3000:])
    return rc, ended, signalled_at[0], stderr, "".join(out_lines)


def main():
    case, drill, mpiexec = sys.argv[1], sys.argv[2], sys.argv[3]
    rc, ended, signalled, stderr, stdout = run(case, drill, mpiexec)
    if case == "no_false_alarm":
        if rc != 0 or "stall watchdog" in stderr or "steps/s" not in stdout:
            fail(f"a healthy run with 1.5 s steps ended with status {rc}")
        print("PASS: 1.5 s steps under an 8 s stall timeout: no alarm, status 0")
        return
    if case == "suspend_all":
        if signalled is None:
            fail("the drill never reached step 5")
        if rc != 0 or "stall watchdog" in stderr or "steps/s" not in stdout:
            fail(f"a job suspended and resumed as a whole ended with status {rc}")
        print("PASS: every rank stopped longer than the stall timeout and resumed: no alarm, status 0")
        return
    if signalled is None:
        fail("the drill never reached step 5")
    took = ended - signalled
    print(f"job ended {took:.1f} s after the stall/kill with status {rc}")
    if rc == 0:
        fail("the job ended with status 0")
    if case == "kill_rank1":
        if took > 60 * SCALE:
            fail(f"took {took:.1f} s (> {60 * SCALE:g} s)")
        print("PASS")
        return
    if rc != 4:
        fail(f"status {rc}, expected the watchdog's 4")
    if took > TIMEOUT_S + SLACK_S:
        fail(f"took {took:.1f} s: not within the {TIMEOUT_S} s stall timeout (+{SLACK_S} s slack)")
    if f"no progress for {TIMEOUT_S:g} s (--stall-timeout)" not in stderr:
        fail(f"the watchdog does not report the {TIMEOUT_S:g} s timeout it waited")
    named = 0 if case == "stop_rank0" else 1
    if not re.search(rf"rank {named} did not arrive: last seen at step \d+", stderr):
        fail(f"the message does not name rank {named} with its last step")
    other = 1 - named
    if re.search(rf"rank {other} did not arrive", stderr):
        fail(f"the message names the healthy rank {other}")
    if case == "hang_rank1" and "stuck in I/O" not in stderr:
        fail("a hung (not stopped) rank is not described as not in the collective")
    print("PASS")


if __name__ == "__main__":
    main()
