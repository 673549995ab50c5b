"""The step-time model's arithmetic: the cost of one allreduce per algorithm, the link a node count
sees, and one step of p = N x R ranks at local batch b:

  step = compute(b) + exposed + data_wait(b)
  exposed = max(0, end of the last bucket's allreduce - backward(b))

The gradient buckets (nostrum-train's own plan, from result.json) are reduced in order by one
communication thread; bucket k starts when it is ready (ready_k x backward, from a trace) and the
previous one has ended. compute(b), backward(b) and data_wait(b) are measured at b (node.py), never
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


def exposed_seconds(backward_s, ready_fractions, bucket_bytes, cost):
    """How long the last bucket's allreduce ends after backward: buckets reduced in order, bucket k
    starting at max(ready_k x backward, the previous one's end); cost(nbytes) is one allreduce."""
    end = 0.0
    for fraction, nbytes in zip(ready_fractions, bucket_bytes):
        end = max(end, fraction * backward_s) + cost(nbytes)
    return max(0.0, end - backward_s)


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
    exposed = exposed_seconds(backward, node.ready_fractions, [4 * f for f in node.bucket_floats],
                              lambda n: allreduce_seconds(n, p, alpha, beta, algorithm))
    step = at["compute_s"] + exposed + at["data_wait_s"]
    return {"nodes": nodes, "ranks": p, "local_batch": local_batch, "global_batch": local_batch * p,
            "compute_s": at["compute_s"], "backward_s": backward, "exposed_s": exposed,
            "data_wait_s": at["data_wait_s"], "step_s": step, "images_per_second": local_batch * p / step,
            "compute_source": at["source"], "algorithm": algorithm}


def efficiency(point, base):
    """Per-node throughput over the base point's."""
    return (point["images_per_second"] / point["nodes"]) / (base["images_per_second"] / base["nodes"])


def best_point(points, key="time_to_solution_s"):
    """The point that minimises key among those that have it (refused points have None)."""
    have = [p for p in points if p.get(key) is not None]
    return min(have, key=lambda p: p[key]) if have else None
