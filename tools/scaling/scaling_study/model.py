"""The step-time model's arithmetic: the cost of one allreduce per algorithm, the link a node count
sees, and one step of p = N x R ranks at local batch b:

  step = compute(b) + exposed + data_wait(b)
  exposed = max(0, end of the last bucket's allreduce - backward(b)) + straggler
  straggler = spread x compute(b) x E[max of p standard normals]

Straggler: every step ends in a collective, so each rank waits for the slowest of the p. A rank's
compute per step varies (spread: its robust standard deviation over the median, from the 1-node
trace); taken as independent normals across ranks, the slowest is E_p standard deviations above the
median (E_2 = 1/sqrt(pi) = 0.56, E_1024 = 3.25), and rank 0 measures that wait inside its exposed
allreduce.

The gradient buckets (nostrum-train's own plan, from result.json; fp32 unless the node says
otherwise) are reduced in order by one
communication thread; bucket k starts when it is ready (ready_k x backward, from a trace) and the
previous one has ended; without overlap (result.json's "overlap") all start after backward. Where
the communication thread has no core of its own (the rank's cores = its OpenMP threads T), it
spins in MPI beside compute: while a bucket is in flight, backward runs at T / (T + 1) of its speed
and the allreduce at the profile's shared_core_comm_speed (calibrate measures it: 1 where the link,
not the core, limits the allreduce). compute(b), backward(b) and data_wait(b) are measured at b (node.py), never
scaled from another batch. Costs of n bytes over p ranks, latency alpha (s), bandwidth beta (B/s):
  ring:               2 (p-1) alpha + 2 (p-1)/p n / beta
  rabenseifner:       2 ceil(log2 p) alpha + 2 (p-1)/p n / beta     (Open MPI's for multi-MB buffers)
  recursive_doubling: ceil(log2 p) (alpha + n / beta)
  tree:               2 ceil(log2 p) (alpha + n / beta)              (binomial reduce + broadcast)
"""
import math

from .common import ScalingError

ALGORITHMS = ("ring", "rabenseifner", "recursive_doubling", "tree")


def allreduce_seconds(nbytes, p, alpha, beta, algorithm):
    if p <= 1:
        return 0.0
    steps = math.ceil(math.log2(p))
    volume = 2 * (p - 1) / p * nbytes / beta
    if algorithm == "ring":
        return 2 * (p - 1) * alpha + volume
    if algorithm == "rabenseifner":
        return 2 * steps * alpha + volume
    if algorithm == "recursive_doubling":
        return steps * (alpha + nbytes / beta)
    if algorithm == "tree":
        return 2 * steps * (alpha + nbytes / beta)
    raise ScalingError(f"unknown allreduce algorithm '{algorithm}' (one of {', '.join(ALGORITHMS)})")


def link(net, nodes, ranks_per_node, algorithm=None):
    """(alpha s, beta B/s, algorithm) for an allreduce over nodes x ranks_per_node ranks: the
    network's figures (per algorithm where the profile measured them), its bandwidth shared by a
    node's ranks; within one node the intra-node bandwidth."""
    algorithm = algorithm or net.get("algorithm", "rabenseifner")
    figures = net.get("algorithms", {}).get(algorithm, net)
    alpha = figures["latency_us"] * 1e-6
    if nodes > 1:
        beta = figures["bandwidth_GBps"] * 1e9 / ranks_per_node
    else:
        beta = net.get("intra_node_bandwidth_GBps", figures["bandwidth_GBps"]) * 1e9
    return alpha, beta, algorithm


def expected_max_of_normals(p):
    """E[max of p independent standard normals]: the integral of x p Phi(x)^(p-1) phi(x) (Simpson,
    x in [-12, 12]); 0 for one."""
    if p <= 1:
        return 0.0
    n, lo, hi = 4800, -12.0, 12.0
    h = (hi - lo) / n
    total = 0.0
    for i in range(n + 1):
        x = lo + i * h
        phi = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1 + math.erf(x / math.sqrt(2)))
        weight = 1 if i in (0, n) else (4 if i % 2 else 2)
        total += weight * x * p * cdf ** (p - 1) * phi
    return total * h / 3


def overlapped_backward(backward_s, ready_fractions, costs, compute_speed=1.0, comm_speed=1.0):
    """(backward's wall time, the last allreduce's end). Bucket k is ready when ready_k of backward's
    work is done; the buckets go in order, each after the previous one. While a bucket is in flight
    during backward, backward runs at compute_speed and the allreduce at comm_speed of their own
    pace (both 1 when the communication thread has a core of its own)."""
    t, work, k, current, queue, last_end = 0.0, 0.0, 0, None, [], 0.0
    ready_work = [min(1.0, f) * backward_s for f in ready_fractions]
    while work < backward_s - 1e-12:
        while k < len(ready_work) and ready_work[k] <= work + 1e-12:
            queue.append(costs[k])
            k += 1
        if current is None and queue:
            current = queue.pop(0)
        rate = compute_speed if current is not None else 1.0
        next_work = min(ready_work[k] if k < len(ready_work) else backward_s, backward_s)
        dt = (next_work - work) / rate
        if current is not None and current / comm_speed <= dt:
            dt, current, last_end = current / comm_speed, None, t + current / comm_speed
        elif current is not None:
            current -= dt * comm_speed
        t += dt
        work = min(backward_s, work + dt * rate)
    rest = ([current] if current is not None else []) + queue + costs[k:]
    return t, (t + sum(rest)) if rest else last_end


def uniform_ready_fractions(bucket_floats):
    """Bucket k ready when backward has produced its bytes, at a uniform rate (no trace)."""
    total, done, out = sum(bucket_floats), 0, []
    for count in bucket_floats:
        done += count
        out.append(done / total)
    return out


def predict_step(node, net, nodes, local_batch, algorithm=None):
    """One step at nodes x node.ranks_per_node ranks of local_batch images each (node: a
    NodeCompute). Returns the step's parts (s), images/s and the algorithm used."""
    R = node.ranks_per_node
    p = nodes * R
    at = node.at(local_batch)
    alpha, beta, algorithm = link(net, nodes, R, algorithm)
    backward = at["compute_s"] * node.backward_share
    costs = [allreduce_seconds(node.gradient_bytes * f, p, alpha, beta, algorithm) for f in node.bucket_floats]
    ready = node.ready_fractions if node.overlap else [1.0] * len(costs)
    compute_speed, comm_speed = (1.0, 1.0) if node.spare_core else (node.threads / (node.threads + 1),
                                                                     net.get("shared_core_comm_speed", 1.0))
    backward_wall, end = (overlapped_backward(backward, ready, costs, compute_speed, comm_speed) if p > 1
                          else (backward, backward))
    straggler = node.compute_spread * at["compute_s"] * expected_max_of_normals(p)
    exposed = max(0.0, end - backward_wall) + straggler
    compute = at["compute_s"] + backward_wall - backward
    step = compute + exposed + at["data_wait_s"]
    return {"nodes": nodes, "ranks": p, "local_batch": local_batch, "global_batch": local_batch * p,
            "compute_s": compute, "backward_s": backward_wall, "exposed_s": exposed, "straggler_s": straggler,
            "data_wait_s": at["data_wait_s"], "step_s": step, "images_per_second": local_batch * p / step,
            "compute_source": at["source"], "algorithm": algorithm}


def efficiency(point, base):
    """Per-node throughput over the base point's."""
    return (point["images_per_second"] / point["nodes"]) / (base["images_per_second"] / base["nodes"])


def best_point(points, key="time_to_solution_s"):
    """The point that minimises key among those that have it (refused points have None)."""
    have = [p for p in points if p.get(key) is not None]
    return min(have, key=lambda p: p[key]) if have else None
