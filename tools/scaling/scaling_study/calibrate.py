"""scaling-study calibrate: a network profile of the cluster at hand. nostrum-allreduce-bench times
one allreduce of each size (--sizes-mb) on N nodes (1 rank each), under Open MPI's own choice and
under each forced algorithm (coll_tuned_allreduce_algorithm: 4 ring, 6 Rabenseifner); a least-squares
line t = a + b n per algorithm gives its latency and bandwidth through the model's cost formula. Each
point is the fastest of CALIBRATION_RUNS runs, taken in turn: on a shared host one run of 3 steps read
183 ms where its neighbours read 109-116, and the fitted Rabenseifner latency with it 19 ms instead of
2 ms (the 2-node resnet8 prediction 16-24 % under the measured images/s).
Then the allreduce's speed (the largest size, in 5 buckets) while a spinning backward shares its core (the benchmark's --busy
overlap against its synchronous time): 1 where the link limits it, about 1/2 where the core does. That speed is the
median of SHARED_CORE_RUNS runs (single runs read 0.62-0.90 on one 2-node cluster)."""
import math
import os
import re
import shlex
import subprocess
import time

from .common import ScalingError, find_binary, read_text, write_json
from .model import allreduce_seconds
from .study import cluster_identity

FORCED = {"ring": 4, "rabenseifner": 6}  # Open MPI's coll_tuned allreduce algorithm numbers
FORCED_FORMULA = {"ring": "ring", "rabenseifner": "rabenseifner"}
CALIBRATION_RUNS = 3  # runs of each algorithm and size; the fastest counts
SHARED_CORE_RUNS = 3  # runs of the shared-core benchmark; their median speed counts


def bench_script(bench, nodes, steps, launcher, sizes_mb, runs=CALIBRATION_RUNS):
    """A bash script that runs the benchmark per algorithm and size, each block marked, the whole list runs
    times over (so a slow moment of the host falls on one run of several points, not on every run of one)."""
    place = "--oversubscribe" if launcher == "local" else "--map-by ppr:1:node --bind-to ${NOSTRUM_MPIRUN_BIND:-core}"
    lines = ["set -e"]
    for name, number in ([("default", None)] + list(FORCED.items())) * runs:
        env = "" if number is None else (f"OMPI_MCA_coll_tuned_use_dynamic_rules=1 "
                                         f"OMPI_MCA_coll_tuned_allreduce_algorithm={number} ")
        for mb in sizes_mb:
            params = int(mb * 1e6 / 4)
            lines.append(f"echo '=== {name} {mb}'")
            lines.append(f"{env}mpirun -n {nodes} {place} $NOSTRUM_MPIRUN_ARGS {shlex.quote(bench)} --params {params} "
                         f"--layers 1 --backward-ms 0 --steps {steps} --bucket-mb {mb} --first-bucket-mb {mb}")
    return "\n".join(lines)


def shared_core_script(bench, nodes, launcher, backward_ms, mb, runs=SHARED_CORE_RUNS):
    """mb MB in 5 buckets, synchronous and overlapped with a spinning 25-layer backward; runs times, each marked."""
    place = "--oversubscribe" if launcher == "local" else "--map-by ppr:1:node --bind-to ${NOSTRUM_MPIRUN_BIND:-core}"
    line = (f"mpirun -n {nodes} {place} $NOSTRUM_MPIRUN_ARGS {shlex.quote(bench)} --params {int(mb * 1e6 / 4)} "
            f"--layers 25 --backward-ms {backward_ms:.0f} --busy --steps 3 --bucket-mb {mb / 5} --first-bucket-mb {mb / 5}")
    return "\n".join(["set -e"] + [f"echo '=== shared {i + 1}'\n{line}" for i in range(runs)])


def shared_core_speed(text):
    """synchronous allreduce time over the overlapped one (<= 1), from the benchmark's two rows."""
    times = dict(re.findall(r"^(synchronous|overlap)\s+\S+\s+\S+\s+(\S+)", text, re.M))
    if set(times) != {"synchronous", "overlap"}:
        raise ScalingError("the shared-core allreduce benchmark printed no synchronous and overlap rows")
    return min(1.0, float(times["synchronous"]) / float(times["overlap"]))


def shared_core_speeds(text, runs=SHARED_CORE_RUNS):
    """(median speed, [speed of each run]) from the marked output of shared_core_script."""
    blocks = re.split(r"^=== shared \d+\s*$", text, flags=re.M)[1:]
    if len(blocks) != runs:
        raise ScalingError(f"the shared-core allreduce benchmark printed {len(blocks)} of its {runs} runs")
    speeds = [shared_core_speed(b) for b in blocks]
    return sorted(speeds)[len(speeds) // 2], speeds


def parse(text):
    """{algorithm: [(bytes, seconds), ...]} from the marked benchmark output, sizes in their first order; a size
    run more than once counts its fastest run (a shaped link is never faster than its rate: noise only adds)."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"=== (\S+) (\S+)", line)
        if m:
            current = (m.group(1), float(m.group(2)))
            continue
        m = re.match(r"synchronous\s+\S+\s+\S+\s+(\S+)", line)
        if m and current:
            sizes = out.setdefault(current[0], {})
            seconds = float(m.group(1)) * 1e-3
            sizes[current[1] * 1e6] = min(seconds, sizes.get(current[1] * 1e6, math.inf))
            current = None
    return {name: list(sizes.items()) for name, sizes in out.items()}


def fit(points, p, algorithm):
    """(latency s, bandwidth B/s) of algorithm from (bytes, seconds) points: t = a + b n, then the
    cost formula's coefficients of alpha and of n / beta at p ranks."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    intercept = my - slope * mx
    if slope <= 0:
        raise ScalingError(f"calibration of {algorithm}: the times do not grow with the size ({points})")
    per_alpha = allreduce_seconds(0, p, 1.0, math.inf, algorithm)
    per_byte = allreduce_seconds(1, p, 0.0, 1.0, algorithm)
    return max(intercept, 1e-7) / per_alpha, per_byte / slope


def run_bench(args, script):
    if args.local:
        try:
            out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            raise ScalingError(f"the allreduce benchmark did not end within --timeout {args.timeout} s") from e
        return out.returncode, out.stdout + out.stderr
    log = os.path.abspath(args.out + ".bench.out")
    site = f". {shlex.quote(os.path.abspath(args.site))}; " if args.site else ""
    out = subprocess.run(["sbatch", "--wait", "-N", str(args.nodes), "--ntasks-per-node=1", "-o", log,
                          "-t", str(max(1, args.timeout // 60)),
                          "--wrap", site + script], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if os.path.exists(log):
        text += read_text(log)
        os.remove(log)
    return out.returncode, text


def calibrate(args):
    bench = args.bench or find_binary("nostrum-allreduce-bench", os.path.join("tools", "bench"))
    if not bench:
        raise ScalingError("nostrum-allreduce-bench not found (--bench PATH)")
    launcher = "local" if args.local else "sbatch"
    sizes = [float(x) for x in args.sizes_mb.split(",")]
    if len(sizes) < 2:
        raise ScalingError("--sizes-mb: at least two sizes, e.g. 0.25,1,4,25")
    script = bench_script(bench, args.nodes, args.steps, launcher, sizes)
    code, text = run_bench(args, script)
    measured = parse(text)
    if code != 0 or set(measured) != {"default", *FORCED} or any(len(v) != len(sizes) for v in measured.values()):
        print(text)
        raise ScalingError("the allreduce benchmark failed (its output is above)")
    backward_ms = 2.5e3 * measured["default"][-1][1]  # 2.5 x the largest size's time alone
    code, shared_text = run_bench(args, shared_core_script(bench, args.nodes, launcher, backward_ms, sizes[-1]))
    if code != 0:
        print(shared_text)
        raise ScalingError("the shared-core allreduce benchmark failed (its output is above)")
    comm_speed, comm_speeds = shared_core_speeds(shared_text)
    figures = {}
    for name, points in measured.items():  # Open MPI's own choice as if it were Rabenseifner
        alpha, beta = fit(points, args.nodes, FORCED_FORMULA.get(name, "rabenseifner"))
        figures[name] = {"latency_us": round(alpha * 1e6, 2), "bandwidth_GBps": round(beta / 1e9, 4)}
    profile = {"name": args.name, "where": cluster_identity(launcher, args.link),
               "source": f"calibrated with nostrum-allreduce-bench on {args.nodes} nodes, "
                         f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
               "algorithm": "rabenseifner", "latency_us": figures["default"]["latency_us"],
               "bandwidth_GBps": figures["default"]["bandwidth_GBps"],
               "intra_node_bandwidth_GBps": figures["default"]["bandwidth_GBps"],
               "algorithms": {k: figures[k] for k in FORCED},
               "shared_core_comm_speed": round(comm_speed, 3),
               "note": "latency_us and bandwidth_GBps: Open MPI's own algorithm choice (what nostrum-train "
                       "uses), fitted with Rabenseifner's cost formula; 'algorithms': each forced algorithm "
                       "fitted with its own formula; shared_core_comm_speed: the allreduce's speed while "
                       "a spinning backward shares its core (the median of calibration.shared_core_comm_speeds)",
               "calibration": {"nodes": args.nodes, "bucket_mb": sizes,
                               "allreduce_ms": {k: [round(1e3 * t, 3) for _, t in v] for k, v in measured.items()},
                               "shared_core_comm_speeds": [round(v, 3) for v in comm_speeds],
                               "script": script}}
    write_json(args.out, profile)
    print(f"calibrate: {args.out}: "
          + "; ".join(f"{k}: {v['latency_us']} us, {v['bandwidth_GBps']} GB/s" for k, v in figures.items())
          + f"; beside a busy core {comm_speed:.2f} of its speed")
    return 0
