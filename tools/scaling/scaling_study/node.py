"""NodeCompute: what one node of the target does per training step, as measured: compute and data
wait per step at each local batch a 1-node run measured (never scaled linearly from another batch:
small per-rank batches lose GEMM efficiency), backward's share of compute and each gradient
bucket's ready time (from --trace), the bucket sizes, the activation bytes and the evaluation cost
(from result.json). Built from a study's 1-node points, or given (ranks, threads, the target
node's measured images/s) for a machine measured elsewhere."""
import os

from .common import ScalingError, shown
from .model import uniform_ready_fractions
from .trace import SPREAD_RUN_STEPS, trace_profile

ASSUMED_BACKWARD_SHARE = 2.0 / 3.0
STATE_BYTES_PER_PARAMETER = 12  # fp32 weights, gradients and momentum


class NodeCompute:
    def __init__(self, ranks_per_node, threads, batches, shape, sources):
        self.ranks_per_node = ranks_per_node
        self.threads = threads
        self.batches = batches  # local batch -> {compute_s, data_wait_s, source}
        self.backward_share = shape["backward_share"]
        self.ready_fractions = shape["ready_fractions"]
        self.bucket_floats = shape["bucket_floats"]
        self.parameters = shape["parameters"]
        self.activation_bytes_per_image = shape["activation_bytes_per_image"]
        self.eval_s_per_image = shape["eval_s_per_image"]  # one node's, per validation image
        self.model = shape["model"]
        self.overlap = shape["overlap"]  # the allreduce overlaps backward on a communication thread
        self.spare_core = shape["rank_cores"] > threads  # ... which then has a core of its own
        self.rank_cores = shape["rank_cores"]
        self.compute_spread = shape["compute_spread"]  # per-step spread over the median (0: none)
        self.gradient_bytes = shape.get("gradient_bytes", 4)  # bytes a gradient value (nostrum-train: fp32)
        self.sources = sources  # input -> where it came from

    def at(self, b):
        """compute_s, data_wait_s per step at local batch b: measured, or interpolated linearly
        between the two measured batches around b; outside them refused."""
        if b in self.batches:
            return self.batches[b]
        below = [k for k in self.batches if k < b]
        above = [k for k in self.batches if k > b]
        if not below or not above:
            raise ScalingError(f"local batch {b:g} was not measured and lies outside the measured ones "
                               f"({', '.join(str(k) for k in sorted(self.batches))}): measure it "
                               f"(a 1-node run at that batch, e.g. scaling-study run --nodes 1 --batch-size {b:g})")
        lo, hi = max(below), min(above)
        w = (b - lo) / (hi - lo)
        mix = {k: (1 - w) * self.batches[lo][k] + w * self.batches[hi][k] for k in ("compute_s", "data_wait_s")}
        mix["source"] = f"interpolated between the measured batches {lo} and {hi}"
        return mix

    def memory_bytes(self, b):
        """One node's training memory at local batch b: activation arenas (linear in the batch,
        from the measured arena size) and weights, gradients and momentum, for each of its ranks."""
        per_rank = self.activation_bytes_per_image * b + STATE_BYTES_PER_PARAMETER * self.parameters
        return self.ranks_per_node * per_rank

    def with_given_compute(self, images_per_second, ranks_per_node, threads, local_batch):
        """The same job's shape on another node whose 1-node training throughput was measured
        there (images/s of the whole node at this local batch and rank count)."""
        step = ranks_per_node * local_batch / images_per_second
        measured = self.measured_images_per_second(local_batch if local_batch in self.batches else min(self.batches))
        node = NodeCompute(ranks_per_node, threads,
                           {local_batch: {"compute_s": step, "data_wait_s": 0.0,
                                          "source": f"given: {images_per_second:g} images/s a node"}},
                           dict(self._shape(), rank_cores=threads), dict(self.sources))
        node.sources["node compute"] = (f"given: {images_per_second:g} images/s a node, {ranks_per_node} rank(s) "
                                        f"x {threads} thread(s), local batch {local_batch}")
        node.sources["overlap"] = (f"allreduce {'overlapped with' if self.overlap else 'after'} backward (result.json); "
                                   f"the target's ranks taken to have {threads} core(s) for {threads} thread(s): "
                                   "no core of its own for the communication thread")
        node.eval_s_per_image = self.eval_s_per_image * measured / images_per_second
        if self.compute_spread:
            node.sources["compute spread"] += " (taken for the given node too: relative to its compute)"
        node.sources["evaluation"] += (f", scaled by the measured over the given training speed "
                                       f"({measured:.3g} / {images_per_second:g} images/s a node)")
        return node

    def take_given_spread(self, spread, source=None):
        """The compute spread given (--node-spread S, a fraction of the step's compute): assumed unless
        its source says where it was published or measured."""
        if not 0 <= spread < 1:
            raise ScalingError(f"--node-spread {spread:g}: a fraction of the step's compute in [0, 1) (0.05 for 5 %)")
        self.compute_spread = spread
        self.sources["compute spread"] = (f"{100 * spread:.1f} % of the step's compute, "
                                          + (source or "given (--node-spread): ASSUMED, not measured on the target"))

    def take_spread_from(self, trace_path):
        """The compute spread from another trace (a 1-node run on the target node)."""
        traced = trace_profile(trace_path)
        if not traced:
            raise ScalingError(f"--node-trace {trace_path}: not a readable Chrome trace with training steps "
                               "(nostrum-train --trace writes trace.rank0.json)")
        if traced["compute_spread"] is None:
            raise ScalingError(f"--node-trace {trace_path}: {traced['steps'] + 1} traced steps give no compute spread: "
                               f"trace at least {SPREAD_RUN_STEPS} steps (--max-steps)")
        self.compute_spread = traced["compute_spread"]
        self.sources["compute spread"] = _spread_source(traced, f"{shown(trace_path)}, --node-trace")

    def measured_images_per_second(self, b):
        at = self.batches[b]
        return self.ranks_per_node * b / (at["compute_s"] + at["data_wait_s"])

    def _shape(self):
        return {"backward_share": self.backward_share, "ready_fractions": self.ready_fractions,
                "bucket_floats": self.bucket_floats, "parameters": self.parameters,
                "activation_bytes_per_image": self.activation_bytes_per_image,
                "eval_s_per_image": self.eval_s_per_image, "model": self.model, "overlap": self.overlap,
                "rank_cores": self.rank_cores, "compute_spread": self.compute_spread,
                "gradient_bytes": self.gradient_bytes}


def _spread_source(traced, where):
    return (f"{100 * traced['compute_spread']:.1f} % of the step's compute (interquartile range / 1.349 of "
            f"{traced['steps'] - 1} steps, {where}): the slowest of p ranks, as independent normals, sets each step")


def _bucket_floats(row):
    buckets = row["result"].get("gradient_buckets")
    if not buckets or not buckets.get("floats") or "overlap" not in row["result"]:
        raise ScalingError(f"{row['run_dir']}/result.json has no gradient_buckets: written by an older "
                           "nostrum-train; rerun the point with this one")
    return buckets["floats"]


def _trace(row):
    return trace_profile(os.path.join(row["run_dir"], "trace.rank0.json"))


def _shape_from(base, rows, sources):
    result = base["result"]
    floats = _bucket_floats(base)
    traced = _trace(base)
    if traced:
        share = traced["backward_ms"] / (traced["forward_ms"] + traced["backward_ms"])
        sources["backward share"] = f"{100 * share:.0f} % of forward + backward, trace of the 1-node point ({traced['steps']} steps)"
    else:
        share = ASSUMED_BACKWARD_SHARE
        sources["backward share"] = "ASSUMED 2/3 (the 1-node point has no trace: run with --trace)"
    spread = traced["compute_spread"] if traced else None
    if spread is not None:
        sources["compute spread"] = _spread_source(traced, "trace of the 1-node point")
    else:
        spread = 0.0
        sources["compute spread"] = (f"NOT MEASURED (the 1-node point has no trace of at least {SPREAD_RUN_STEPS} "
                                     "steps: run with --trace): no straggler wait")
    ready = None
    for r in rows:  # 1 rank has no allreducer: the ready times come from a multi-rank point's trace
        t = _trace(r) if r["ok"] and r["ranks"] > 1 else None
        if t and t["ready_fractions"] and len(t["ready_fractions"]) == len(floats):
            ready = t["ready_fractions"]
            sources["bucket ready times"] = (f"trace of the {r['nodes']}-node point: "
                                             + ", ".join(f"{f:.2f}" for f in ready) + " of backward")
            break
    if ready is None:
        ready = uniform_ready_fractions(floats)
        sources["bucket ready times"] = "ASSUMED uniform over backward (no multi-rank trace with the same buckets)"
    sources["gradient buckets"] = (f"{len(floats)} bucket(s), {sum(floats)} floats ({4e-6 * sum(floats):.1f} MB), "
                                   f"from {shown(base['run_dir'])}/result.json")
    evals = base["evaluations"] * (base["eval_samples"] or 0)
    eval_s = base["evaluation_s"] / evals if evals else 0.0
    sources["evaluation"] = (f"{1e3 * eval_s:.3f} ms a validation image on one node "
                             f"({base['evaluations']} evaluation(s) of the 1-node point)" if evals
                             else "NOT MEASURED (the 1-node point has no evaluation): taken as 0")
    act = result["activation_bytes"] / result["batch_size"]
    sources["activation bytes"] = (f"{act / 1e6:.2f} MB an image (arena of {result['activation_bytes'] / 1e9:.2f} GB "
                                   f"at batch {result['batch_size']}, result.json)")
    sources["overlap"] = (f"allreduce {'overlapped with' if result['overlap'] else 'after'} backward, "
                          f"{result['rank_cores']} core(s) for {base['threads_per_rank']} thread(s) a rank "
                          f"({'a core of its own' if result['rank_cores'] > base['threads_per_rank'] else 'no core of its own'}"
                          " for the communication thread; result.json)")
    return {"backward_share": share, "ready_fractions": ready, "bucket_floats": floats,
            "parameters": result["parameters"], "activation_bytes_per_image": act,
            "eval_s_per_image": eval_s, "model": result["model"], "overlap": result["overlap"],
            "rank_cores": result["rank_cores"], "compute_spread": spread}


def from_study(meta, rows, sweep):
    """The node's compute from a study's 1-node points (the study itself and its compute sweep)."""
    ones = [r for r in rows + sweep if r["ok"] and r["nodes"] == 1]
    if not ones:
        raise ScalingError("the study has no 1-node point that ran: per-node compute comes from a measured "
                           "1-node point of the same job (scaling-study run --nodes 1,...)")
    base = ones[0]
    R = base["ranks"]
    sources = {}
    batches = {}
    for r in ones:
        if r["ranks"] != R:
            continue
        batches[r["local_batch"]] = {"compute_s": r["compute_ms"] * 1e-3, "data_wait_s": r["data_wait_ms"] * 1e-3,
                                     "source": f"measured: 1 node, {r['steps']} steps ({shown(r['run_dir'])})"}
    sources["node compute"] = (f"measured on 1 node ({R} rank(s) x {base['threads_per_rank']} thread(s)) at local "
                               f"batch(es) {', '.join(str(b) for b in sorted(batches))}"
                               + (f", beside {base['fillers']} node(s) running a copy of the job (--fill-idle-nodes)"
                                  if base.get("fillers") else ""))
    return NodeCompute(R, base["threads_per_rank"], batches, _shape_from(base, rows, sources), sources)
