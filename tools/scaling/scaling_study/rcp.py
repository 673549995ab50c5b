"""MLPerf's reference convergence points (tools/scaling/rcp/mlperf_resnet_rcp.csv): epochs ResNet-50
needs to reach 75.9 % at a global batch. Between two reference batches the mean, min and max are
interpolated linearly in the batch; below the smallest the smallest's are used (marked); beyond
the largest there is no answer (out of range), never an extrapolation."""
import csv

from .common import ScalingError, data_file


def load_rcp(name="mlperf_resnet_rcp"):
    path = data_file("rcp", name, ".csv")
    rows = []
    with open(path, encoding="utf-8") as f:
        for line_no, r in enumerate(csv.DictReader(line for line in f if not line.startswith("#")), 2):
            try:
                each = [float(e) for e in r["epochs_each"].split()]
                rows.append({"global_batch": int(r["global_batch"]), "mean": sum(each) / len(each),
                             "min": min(each), "max": max(each), "runs": len(each), "each": each})
            except (KeyError, ValueError, ZeroDivisionError, AttributeError) as e:
                raise ScalingError(f"{path}: row {line_no} unreadable ({e})") from None
    if not rows:
        raise ScalingError(f"{path}: no convergence points")
    rows.sort(key=lambda r: r["global_batch"])
    return {"path": path, "rows": rows}


def mapped(rcp, schedule):
    """The table with each reference run's epochs passed through schedule (e.g. to the epoch a run
    with another evaluation schedule would stop at), each row's mean, min and max recomputed."""
    rows = []
    for r in rcp["rows"]:
        each = [schedule(e) for e in r["each"]]
        rows.append(dict(r, each=each, mean=sum(each) / len(each), min=min(each), max=max(each)))
    return dict(rcp, rows=rows)


def epochs_at(rcp, global_batch):
    """{mean, min, max, how} at global_batch; how says measured, interpolated or below range.
    None beyond the largest reference batch (out of range)."""
    rows = rcp["rows"]
    if global_batch > rows[-1]["global_batch"]:
        return None
    if global_batch <= rows[0]["global_batch"]:
        r = rows[0]
        how = "reference" if global_batch == r["global_batch"] else f"below range: the {r['global_batch']} row's"
        return {"mean": r["mean"], "min": r["min"], "max": r["max"], "how": how}
    for lo, hi in zip(rows, rows[1:]):
        if lo["global_batch"] < global_batch <= hi["global_batch"]:
            if global_batch == hi["global_batch"]:
                return {"mean": hi["mean"], "min": hi["min"], "max": hi["max"], "how": "reference"}
            w = (global_batch - lo["global_batch"]) / (hi["global_batch"] - lo["global_batch"])
            return {k: (1 - w) * lo[k] + w * hi[k] for k in ("mean", "min", "max")} | {
                "how": f"interpolated {lo['global_batch']}-{hi['global_batch']}"}
    raise AssertionError("unreachable: the rows are sorted")
