"""Published multi-node ResNet-50 runs (tools/scaling/published/runs.json) projected from their own
inputs: each run's node (its published images/s a node, ranks, threads, gradient buckets), its
network's figures, its epochs (given, or the RCP's to 75.9 %) and its evaluation schedule; nothing
is taken from the outcome. Printed beside the publication: images/s, efficiency and
time-to-solution at each published node count, with the error."""
from .common import ScalingError, data_file, read_json, shown
from .model import expected_max_of_normals, link
from .node import ASSUMED_BACKWARD_SHARE, NodeCompute
from .project import IMAGENET_TRAIN, IMAGENET_VAL, project, stopping_epoch
from .rcp import load_rcp

EVAL_COST_OF_TRAINING = 1.0 / 3.0  # an evaluation image: forward only, a third of a training image (ASSUMED)
TTS_TARGET = 0.10  # the check: time-to-solution within 10 %
EFFICIENCY_TARGET = 0.05  # and efficiency within 5 points


def load_published(path=None):
    path = path or data_file("published", "runs", ".json")
    table = read_json(path)
    if table is None or not isinstance(table.get("runs"), list) or not table["runs"]:
        raise ScalingError(f"published runs table {path}: unreadable (not JSON with a list 'runs')")
    for run in table["runs"]:
        for key in ("id", "network", "ranks_per_node", "threads_per_rank", "comm_cores", "gradients", "node",
                    "evaluation", "compute_spread", "points"):
            if key not in run:
                raise ScalingError(f"{path}: run '{run.get('id', '?')}' has no '{key}'")
        for point in run["points"]:
            if "nodes" not in point or "local_batch" not in point or "published" not in point:
                raise ScalingError(f"{path}: run '{run['id']}': a point without nodes, local_batch or published")
    table["path"] = path
    return table


def bucket_floats(gradients):
    """The gradient buckets in values: a count of equal buckets, or a list of sizes in MB."""
    params, size = gradients["parameters"], gradients["bytes_per_value"]
    buckets = gradients["buckets"]
    if isinstance(buckets, int):
        return [params / buckets] * buckets
    return [mb * 1e6 / size for mb in buckets]


def run_node(run, spread=None, spread_source=None):
    """The run's node as the model takes it: its published images/s a node at its local batch, the
    same rate a node at every other local batch of its points (marked: not published there)."""
    n = run["node"]
    R = run["ranks_per_node"]["value"]
    T = run["threads_per_rank"]["value"] or 1
    comm = run["comm_cores"]["value"]
    step = lambda b: R * b / n["images_per_second"]  # noqa: E731
    batches = {n["local_batch"]: {"compute_s": step(n["local_batch"]), "data_wait_s": 0.0,
                                  "source": f"published: {n['images_per_second']:g} images/s a node"}}
    for p in run["points"]:
        if p["local_batch"] not in batches:
            note = (f"ASSUMED: {n['images_per_second']:g} images/s a node at local batch {p['local_batch']} too "
                    f"(published at {n['local_batch']} only)")
            batches[p["local_batch"]] = {"compute_s": step(p["local_batch"]), "data_wait_s": 0.0, "source": note}
    g = run["gradients"]
    floats = bucket_floats(g)
    total, done, ready = sum(floats), 0.0, []
    for f in floats:
        done += f
        ready.append(done / total)
    given = spread if spread is not None else run["compute_spread"]["value"]
    shape = {"backward_share": ASSUMED_BACKWARD_SHARE, "ready_fractions": ready, "bucket_floats": floats,
             "parameters": g["parameters"], "activation_bytes_per_image": 0.0,
             "eval_s_per_image": EVAL_COST_OF_TRAINING / n["images_per_second"], "model": "resnet50",
             "overlap": g["overlap"], "rank_cores": T + 1 if comm else T, "compute_spread": given or 0.0,
             "gradient_bytes": g["bytes_per_value"]}
    sources = {
        "node compute": (f"{n['images_per_second']:g} images/s a node at local batch {n['local_batch']} "
                         f"({n['at_nodes']} node(s)): {n['kind']}; {n['source']}"),
        "ranks and threads": (f"{R} rank(s) a node ({run['ranks_per_node']['source']}) x "
                              f"{run['threads_per_rank']['value'] or 'unpublished'} thread(s) "
                              f"({run['threads_per_rank']['source']})"),
        "communication cores": f"{'a core of its own' if comm else 'none of its own'} ({run['comm_cores']['source']})",
        "gradient buckets": (f"{len(floats)} bucket(s), {total * g['bytes_per_value'] / 1e6:.1f} MB "
                             f"({g['bytes_per_value']} bytes a value), "
                             f"{'overlapped with' if g['overlap'] else 'after'} backward: {g['source']}"),
        "backward share": "ASSUMED 2/3 of compute (not published)",
        "compute spread": (f"{100 * given:.1f} % of compute, " + (spread_source or run["compute_spread"]["source"])
                           if given else f"none ({run['compute_spread']['source']}): no straggler wait"),
        "evaluation": (f"{run['evaluation']['source']}; an evaluation image at {EVAL_COST_OF_TRAINING:.2g} of a "
                       "training image's cost (ASSUMED)"),
    }
    return NodeCompute(R, T, batches, shape, sources)


def run_network(run):
    net = dict(run["network"])
    net.setdefault("source", "")
    net["path"] = "published/runs.json"
    return net


def _epochs(point):
    """(given epochs or None, the epochs the run itself needed or None)."""
    e = point.get("epochs") or {}
    return e.get("given"), e.get("needed")


def project_point(run, node, net, rcp, point):
    """One published point projected: images/s and time-to-solution (to the RCP's epochs or the given ones; also at the epochs the run
    needed, where it trained to a target)."""
    ev = run["evaluation"]
    every, offset = (ev["every"], ev["offset"]) if ev["every"] else (1, -1)
    val = IMAGENET_VAL if ev["every"] else 0
    given, needed = _epochs(point)
    kwargs = {"local_batch": point["local_batch"], "train_images": IMAGENET_TRAIN, "val_images": val,
              "eval_every": every, "eval_offset": offset}
    row = project(node, net, rcp, [point["nodes"]], epochs=given, **kwargs)[0]
    if row.get("refused") and not row.get("images_per_second"):
        raise ScalingError(f"run '{run['id']}' at {point['nodes']} nodes: {row['refused']}")
    out = {"nodes": point["nodes"], "ranks": row["ranks"], "local_batch": point["local_batch"],
           "global_batch": row["global_batch"], "images_per_second": row["images_per_second"],
           "exposed_ms": 1e3 * row["exposed_s"], "straggler_ms": 1e3 * row["straggler_s"],
           "step_ms": 1e3 * row["step_s"]}
    has_epochs = given is not None or (point.get("epochs") or {}).get("target") is not None
    if has_epochs and row.get("time_to_solution_s"):
        out["tts_s"] = row["time_to_solution_s"]
        out["epochs"] = row["trained_epochs_mean"]
        band = f"{row['trained_epochs_min']:g}-{row['trained_epochs_max']:g}"
        out["epochs_how"] = "given" if given is not None else f"RCP, to the next evaluation ({band})"
    if needed is not None and given is None:
        trained = stopping_epoch(needed, every, offset)
        own = project(node, net, rcp, [point["nodes"]], epochs=trained, **kwargs)[0]
        out["tts_own_epochs_s"], out["own_epochs"] = own["time_to_solution_s"], trained
    return out


def published_reference(run, point):
    """What the publication says at this point: images/s, efficiency over the node input's rate
    (given, or derived from its images/s or time-to-solution, and said so), time-to-solution."""
    pub, node = point["published"], run["node"]
    ref = {"tts_s": pub.get("tts_s"), "images_per_second": pub.get("images_per_second"),
           "efficiency": pub.get("efficiency"), "efficiency_how": "published" if pub.get("efficiency") else None,
           "bound": pub.get("efficiency_bound")}
    self_point = point["nodes"] == node["at_nodes"] and point["local_batch"] == node["local_batch"]
    if ref["efficiency"] is None and not self_point:
        rate = ref["images_per_second"]
        given, _ = _epochs(point)
        if rate is None and ref["tts_s"] and given:
            rate = given * IMAGENET_TRAIN / ref["tts_s"]
            ref["efficiency_how"] = "derived from the published time-to-solution"
        elif rate is not None:
            ref["efficiency_how"] = "derived from the published images/s"
        if rate is not None:
            ref["efficiency"] = rate / point["nodes"] / node["images_per_second"]
    ref["self_point"] = self_point
    return ref


def base_rate(run, node, net, rcp):
    """The model's images/s a node at the node input's own point (its node count and local batch):
    efficiency is over it, so that the allreduce a multi-node input rate already holds, which the
    model adds again, cancels in the ratio."""
    n = run["node"]
    base = {"nodes": n["at_nodes"], "local_batch": n["local_batch"], "published": {}, "epochs": None}
    return project_point(run, node, net, rcp, base)["images_per_second"] / n["at_nodes"]


def check(run, spread=None, spread_source=None, rcp=None):
    rcp = rcp or load_rcp()
    node, net = run_node(run, spread, spread_source), run_network(run)
    base = base_rate(run, node, net, rcp)
    rows = []
    for point in run["points"]:
        proj, ref = project_point(run, node, net, rcp, point), published_reference(run, point)
        proj["efficiency"] = proj["images_per_second"] / point["nodes"] / base
        if ref["tts_s"] and proj.get("tts_s"):
            proj["tts_error"] = proj["tts_s"] / ref["tts_s"] - 1
            if proj.get("tts_own_epochs_s"):
                proj["tts_own_error"] = proj["tts_own_epochs_s"] / ref["tts_s"] - 1
        if ref["images_per_second"]:
            proj["rate_error"] = proj["images_per_second"] / ref["images_per_second"] - 1
        if ref["efficiency"] is not None and not ref["self_point"]:
            proj["efficiency_points"] = 100 * (proj["efficiency"] - ref["efficiency"])
        rows.append({"projected": proj, "published": ref, "point": point})
    return node, net, rows


def within_target(row):
    """True, False, or None where the point publishes nothing the check can compare."""
    p = row["projected"]
    verdicts = []
    if "tts_error" in p:
        verdicts.append(abs(p["tts_error"]) <= TTS_TARGET)
    if "efficiency_points" in p:
        bound = row["published"].get("bound")
        diff = p["efficiency_points"]
        limit = 100 * EFFICIENCY_TARGET
        verdicts.append(diff >= -limit if bound == "at least" else abs(diff) <= limit)
    return all(verdicts) if verdicts else None


def _pct(x):
    return "-" if x is None else f"{100 * x:+.1f} %"


def _min(s):
    return "-" if s is None else f"{s / 60:.1f}"


def run_text(run, node, net, rows):
    alpha, beta, algorithm = link(net, 2, node.ranks_per_node)
    lines = [f"### {run['id']}: {run['title']}", "", f"- system: {run['system']}; {run['framework']}"]
    lines += [f"- {k}: {v}" for k, v in node.sources.items()]
    lines.append(f"- network: {net['name']}, {net['latency_us']:g} us, {net['bandwidth_GBps']:g} GB/s a node "
                 f"({beta / 1e9:.3g} GB/s a rank: its {node.ranks_per_node} rank(s) share the link), {algorithm}; "
                 f"topology: {net['topology']}; {net['source']}"
                 + ("" if net.get("verified") else " [NOT VERIFIED against a measurement of this network]"))
    for r in rows:
        e = r["point"].get("epochs")
        if e:
            lines.append(f"- epochs at {r['point']['nodes']} nodes: " + (f"{e['given']:g} given" if "given" in e else
                         f"to {e['target']} % top-1 (RCP); the run needed {e.get('needed')}") + f" ({e['source']})")
        pub = r["point"]["published"]
        for key in ("tts_source", "images_per_second_source", "efficiency_source"):
            if pub.get(key):
                what = key.split("_source")[0].replace("_", " ")
                lines.append(f"- published {what} at {r['point']['nodes']} nodes: {pub[key]}")
    header = ("nodes", "ranks", "local", "global", "exposed ms (wait)", "images/s proj", "publ", "err",
              "eff proj", "publ", "points", "epochs", "TTS min proj", "publ", "err", "at the run's epochs", "target")
    lines += ["", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---:|" * len(header))
    for r in rows:
        p, ref = r["projected"], r["published"]
        eff_pub = ("-" if ref["efficiency"] is None or ref["self_point"] else
                   (">=" if ref.get("bound") == "at least" else "") + f"{ref['efficiency']:.2f}"
                   + ("" if ref["efficiency_how"] == "published" else "*"))
        own = (f"{_min(p['tts_own_epochs_s'])} ({p['own_epochs']:g} ep, {_pct(p.get('tts_own_error'))})"
               if p.get("tts_own_epochs_s") else "-")
        verdict = within_target(r)
        cells = [p["nodes"], p["ranks"], f"{p['local_batch']:g}", f"{p['global_batch']:g}",
                 f"{p['exposed_ms']:.1f} ({p['straggler_ms']:.1f})", f"{p['images_per_second']:.0f}",
                 f"{ref['images_per_second']:.0f}" if ref["images_per_second"] else "-", _pct(p.get("rate_error")),
                 f"{p['efficiency']:.2f}" if not ref["self_point"] else "(input)", eff_pub,
                 f"{p['efficiency_points']:+.1f}" if "efficiency_points" in p else "-",
                 f"{p['epochs']:.2f}" if "epochs" in p else "-", _min(p.get("tts_s")), _min(ref["tts_s"]),
                 _pct(p.get("tts_error")), own, {True: "within", False: "MISS", None: "-"}[verdict]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if any(r["published"]["efficiency_how"] not in (None, "published") for r in rows):
        lines.append("\n\\* efficiency derived from the published images/s or time-to-solution, not published as such")
    if run.get("note"):
        lines.append(f"\nNote: {run['note']}")
    return "\n".join(lines)


def published_main(args):
    table = load_published(args.table)
    rcp = load_rcp(args.rcp)
    spread_source = "given (--node-spread): ASSUMED, no published figure" if args.node_spread is not None else None
    if args.node_spread is not None and not 0 <= args.node_spread < 1:
        raise ScalingError(f"--node-spread {args.node_spread:g}: a fraction of the step's compute in [0, 1)")
    out, summary = [f"published runs: {shown(table['path'])}; RCPs: {shown(rcp['path'])}; targets: time-to-solution "
                    f"within {100 * TTS_TARGET:.0f} %, efficiency within {100 * EFFICIENCY_TARGET:.0f} points", ""], []
    for run in table["runs"]:
        if args.run and run["id"] not in args.run.split(","):
            continue
        node, net, rows = check(run, args.node_spread, spread_source, rcp)
        out.append(run_text(run, node, net, rows))
        for i, r in enumerate(rows):
            if within_target(r) is False and "efficiency_points" in r["projected"] and args.node_spread is None:
                s = spread_to_close(run, i, rcp)
                R = run["ranks_per_node"]["value"]
                p0, p1 = run["node"]["at_nodes"] * R, r["projected"]["ranks"]
                out.append(f"\nDiagnostic, not an input: at {r['point']['nodes']} nodes the published efficiency needs "
                           + (f"a compute spread of {100 * s:.1f} % (the straggler wait alone)" if s is not None
                              else f"more than a 50 % compute spread: the expected slowest of p normals grows only "
                                   f"from {expected_max_of_normals(p0):.2f} ({p0} ranks, the input's own point) to "
                                   f"{expected_max_of_normals(p1):.2f} ({p1}): not independent stragglers"))
        out.append("")
        summary += [(run["id"], r) for r in rows]
    if not summary:
        raise ScalingError(f"--run {args.run}: no such run in {table['path']}")
    out += ["### Summary", "", "| run | nodes | time-to-solution error | efficiency (points) | verdict |",
            "|---|---:|---:|---:|---|"]
    for rid, r in summary:
        p = r["projected"]
        eff = f"{p['efficiency_points']:+.1f}" if "efficiency_points" in p else "-"
        verdict = {True: "within", False: "MISS", None: "nothing to compare"}[within_target(r)]
        out.append(f"| {rid} | {p['nodes']} | {_pct(p.get('tts_error'))} | {eff} | {verdict} |")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    return 0


def spread_to_close(run, point_index, rcp=None):
    """Diagnostic only, never an input: the compute spread at which the model's efficiency at this
    point would equal the published one (None if no spread below 50 % reaches it)."""
    rcp = rcp or load_rcp()
    point = run["points"][point_index]
    ref = published_reference(run, point)
    if ref["efficiency"] is None:
        return None
    lo, hi = 0.0, 0.5
    if check_efficiency(run, point, hi, rcp) > ref["efficiency"]:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if check_efficiency(run, point, mid, rcp) > ref["efficiency"] else (lo, mid)
    return (lo + hi) / 2


def check_efficiency(run, point, spread, rcp):
    node, net = run_node(run, spread), run_network(run)
    rate = project_point(run, node, net, rcp, point)["images_per_second"] / point["nodes"]
    return rate / base_rate(run, node, net, rcp)
