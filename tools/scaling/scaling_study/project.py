"""Time-to-solution at N nodes: for each node count, the model's images/s and efficiency, the global
batch, the epochs MLPerf's reference runs needed at that batch (rcp.py, with the spread of the runs
as a band), the epochs trained (each reference run's epochs taken to the job's next scheduled
evaluation, since only an evaluation sees the target, then averaged), the evaluation time and the
projected time-to-solution; the node count that minimises it; points that do not fit in memory or
lie beyond the RCP table are refused, with the reason. A run of a fixed epoch budget (--epochs N)
trains N epochs and passes the scheduled evaluations within them, the RCP unused."""
import math

from .common import ScalingError
from .model import best_point, efficiency, predict_step
from .rcp import epochs_at, mapped

IMAGENET_TRAIN = 1_281_167
IMAGENET_VAL = 50_000


def memory_refusal(node, local_batch, node_memory_gb):
    """The reason a point does not fit in the node's memory, or None (None also when unknown)."""
    if not node_memory_gb:
        return None
    need = node.memory_bytes(local_batch)
    if need > node_memory_gb * 1e9:
        return (f"does not fit: {node.ranks_per_node} rank(s) x local batch {local_batch:g} need "
                f"{need / 1e9:.1f} GB of {node_memory_gb:g} GB")
    return None


def first_evaluation(eval_every, eval_offset):
    """The epoch of the first evaluation: nostrum-train's --eval-offset K evaluates after epochs
    K+1, K+1+N, ... (N = --eval-every); K = -1 after epochs N, 2N, ..."""
    return eval_offset + 1 if eval_offset >= 0 else eval_every


def stopping_epoch(needed, eval_every, eval_offset):
    """A run that reaches the target after `needed` epochs (the RCP's, rounded up) stops at the
    first evaluation at or after it: only an evaluation can see the target reached."""
    first, need = first_evaluation(eval_every, eval_offset), math.ceil(needed - 1e-9)
    return first if need <= first else first + math.ceil((need - first) / eval_every) * eval_every


def evaluations_within(epochs, eval_every, eval_offset):
    """The scheduled evaluations a run of a given number of epochs passes (none before the first)."""
    first = first_evaluation(eval_every, eval_offset)
    return 0 if epochs < first - 1e-9 else math.floor((epochs - first) / eval_every + 1e-9) + 1


def time_to_solution(point, trained, train_images, val_images, eval_every, eval_s_per_image, eval_offset=-1,
                     evaluations=None):
    """(seconds, evaluations) of a run that trains `trained` epochs (a stopping epoch of the
    schedule, or the mean of several) at the point's images/s and evaluates val_images at each
    scheduled evaluation up to it (or `evaluations` times, where given), the evaluation spread over
    the point's nodes."""
    if evaluations is None:
        evaluations = (trained - first_evaluation(eval_every, eval_offset)) / eval_every + 1
    eval_s = val_images * eval_s_per_image / point["nodes"]
    return trained * train_images / point["images_per_second"] + evaluations * eval_s, evaluations


def project(node, net, rcp, nodes_list, local_batch=None, global_batch=None, train_images=IMAGENET_TRAIN,
            val_images=IMAGENET_VAL, eval_every=4, eval_offset=-1, node_memory_gb=None, epochs=None):
    """One row per node count; local_batch fixed (global = nodes x ranks x local), or global_batch
    fixed (local = global / ranks). epochs: a run of that many epochs (--epochs, a fixed budget)
    instead of the RCP's epochs to 75.9 %."""
    R = node.ranks_per_node
    rows = []
    for n in nodes_list:
        b = global_batch / (n * R) if global_batch else local_batch
        row = {"nodes": n, "ranks": n * R, "local_batch": b, "global_batch": b * n * R, "refused": None}
        row["refused"] = memory_refusal(node, b, node_memory_gb)
        if row["refused"] is None:
            try:
                row.update(predict_step(node, net, n, b))
            except ScalingError as e:  # an unmeasured local batch: refused with the reason
                row["refused"] = str(e)
        rows.append(row)
    trained_rcp = mapped(rcp, lambda e: stopping_epoch(e, eval_every, eval_offset))
    base = next((r for r in rows if r.get("images_per_second")), None)
    for r in rows:
        if not r.get("images_per_second"):
            continue
        r["efficiency"] = efficiency(r, base)
        r["epoch_s"] = train_images / r["images_per_second"]
        r["eval_s"] = val_images * node.eval_s_per_image / r["nodes"]
        if epochs is not None:
            r["epochs"] = {"mean": epochs, "min": epochs, "max": epochs, "how": "given (--epochs)"}
            for key in ("mean", "min", "max"):
                r[f"trained_epochs_{key}"] = epochs
            r["tts_mean_s"], r["evaluations"] = time_to_solution(
                r, epochs, train_images, val_images, eval_every, node.eval_s_per_image, eval_offset,
                evaluations=evaluations_within(epochs, eval_every, eval_offset))
            r["tts_min_s"] = r["tts_max_s"] = r["time_to_solution_s"] = r["tts_mean_s"]
            continue
        e = epochs_at(rcp, r["global_batch"])
        if e is None:
            r["refused"] = (f"global batch {r['global_batch']:g} beyond the RCP table's largest "
                            f"({rcp['rows'][-1]['global_batch']}): out of range")
            continue
        r["epochs"] = e
        trained = epochs_at(trained_rcp, r["global_batch"])
        for key in ("mean", "min", "max"):
            r[f"trained_epochs_{key}"] = trained[key]
            r[f"tts_{key}_s"], evaluations = time_to_solution(r, trained[key], train_images, val_images, eval_every,
                                                              node.eval_s_per_image, eval_offset)
            if key == "mean":
                r["evaluations"] = evaluations
        r["time_to_solution_s"] = r["tts_mean_s"]
    best = best_point(rows)
    for r in rows:
        r["best"] = r is best
    return rows
