"""The PNGs: a study's throughput, efficiency and time split (with the model where it is compared),
and a projection's time-to-solution against nodes with the RCP band. matplotlib (Agg) only."""
import os


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _log2_axes(plt, nodes, ylabel, title):
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.set_xscale("log", base=2)
    ax.set_xticks(nodes)
    ax.set_xticklabels([str(n) for n in nodes])
    ax.set_xlabel("nodes")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _mark_failed(ax, failed, y):
    for r in failed:
        ax.plot(r["nodes"], y, "rx", markersize=12, mew=3)
        ax.annotate(f"FAILED (exit {r['exit_code']})", (r["nodes"], y), textcoords="offset points",
                    xytext=(5, 8), color="red")


def _save(plt, fig, ax, path):
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _throughput(plt, study, title, rows, ok, failed, prediction):
    nodes_all = [r["nodes"] for r in rows]
    fig, ax = _log2_axes(plt, nodes_all, "images/s", title)
    if ok:
        base = ok[0]
        ideal_x = [base["nodes"], max(nodes_all)]
        ax.plot(ideal_x, [base["images_per_second"] * n / base["nodes"] for n in ideal_x], "k--", label="ideal")
        ax.plot([r["nodes"] for r in ok], [r["images_per_second"] for r in ok], "o-", label="measured")
    if prediction:
        pts = [p for p in prediction["points"] if "refused" not in p]
        ax.plot([p["nodes"] for p in pts], [p["images_per_second"] for p in pts], "s:",
                label=f"model ({prediction['network']['name']})")
    _mark_failed(ax, failed, min([r["images_per_second"] for r in ok] or [1]) * 0.5)
    _save(plt, fig, ax, os.path.join(study, "throughput.png"))


def _efficiency(plt, study, title, rows, ok, failed, prediction):
    fig, ax = _log2_axes(plt, [r["nodes"] for r in rows], "parallel efficiency", title)
    ax.axhline(1.0, color="k", linestyle="--", label="ideal")
    if ok:
        ax.plot([r["nodes"] for r in ok], [r["efficiency"] for r in ok], "o-", label="measured")
    if prediction:
        pts = [p for p in prediction["points"] if "refused" not in p]
        ax.plot([p["nodes"] for p in pts], [p["efficiency"] for p in pts], "s:",
                label=f"model ({prediction['network']['name']})")
    ax.set_ylim(0, 1.15)
    _mark_failed(ax, failed, 0.05)
    _save(plt, fig, ax, os.path.join(study, "efficiency.png"))


def _time_split(plt, study, title, rows):
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    x = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for key, label, color in (("compute_ms", "compute", "tab:blue"),
                              ("exposed_allreduce_ms", "exposed allreduce", "tab:red"),
                              ("data_wait_ms", "data wait", "tab:orange")):
        values = [r.get(key) or 0.0 for r in rows]
        ax.bar([i - 0.18 for i in x], values, 0.36, bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.bar([i + 0.18 for i in x], [r.get("hidden_allreduce_ms") or 0.0 for r in rows], 0.36,
           label="hidden allreduce (inside compute)", color="tab:green", hatch="//", alpha=0.6)
    for i, r in enumerate(rows):
        if not r["ok"]:
            ax.text(i, 0, f"FAILED\nexit {r['exit_code']}", color="red", ha="center", va="bottom", fontweight="bold")
    ax.set_xticks(x)
    ax.set_xticklabels([str(r["nodes"]) for r in rows])
    ax.set_xlabel("nodes")
    ax.set_ylabel("ms per training step")
    ax.set_title(title + ": where a step's time goes")
    _save(plt, fig, ax, os.path.join(study, "time_split.png"))


def plot_study(study, meta, rows, prediction):
    plt = _pyplot()
    ok = [r for r in rows if r["ok"]]
    failed = [r for r in rows if not r["ok"]]
    title = f"{os.path.splitext(os.path.basename(meta['job']))[0]}, {meta['mode']} scaling"
    _throughput(plt, study, title, rows, ok, failed, prediction)
    _efficiency(plt, study, title, rows, ok, failed, prediction)
    _time_split(plt, study, title, rows)


def plot_projection(path, rows, title):
    """Time-to-solution (hours) against nodes: the RCP mean, its min-max band, the optimum."""
    plt = _pyplot()
    fig, ax = _log2_axes(plt, [r["nodes"] for r in rows], "projected time-to-solution (hours)", title)
    ax.set_yscale("log")
    have = [r for r in rows if r.get("time_to_solution_s") is not None]
    x = [r["nodes"] for r in have]
    ax.fill_between(x, [r["tts_min_s"] / 3600 for r in have], [r["tts_max_s"] / 3600 for r in have],
                    alpha=0.3, label="band: fastest and slowest MLPerf reference run")
    ax.plot(x, [r["tts_mean_s"] / 3600 for r in have], "o-", label="mean of the reference runs' epochs")
    for r in have:
        if r["best"]:
            ax.plot(r["nodes"], r["tts_mean_s"] / 3600, "r*", markersize=16, label=f"minimum: {r['nodes']} nodes")
    refused = [r for r in rows if r.get("refused")]
    if refused:
        ax.text(0.02, 0.03, "not projected: " + ", ".join(str(r["nodes"]) for r in refused) + " nodes "
                "(out of the RCP range or memory)", transform=ax.transAxes, fontsize="small")
    _save(plt, fig, ax, path)
