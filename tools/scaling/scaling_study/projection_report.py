"""The projection as a user reads it: every input with its source, then one line per node count
(images/s, efficiency, global batch, epochs with their band, epochs trained, the exposed allreduce
with the straggler wait, evaluation, time-to-solution, the minimum marked, refusals with their
reason), as text and Markdown; and the JSON of it."""
from .common import shown
from .project import first_evaluation


def _hours(seconds):
    return seconds / 3600.0


def input_lines(node, net, rcp, options):
    out = [f"model: {node.model}, {node.parameters} parameters, {node.ranks_per_node} rank(s) x "
           f"{node.threads} thread(s) a node"]
    out += [f"{k}: {v}" for k, v in node.sources.items()]
    out.append(f"network: {net['name']} ({net.get('source') or net.get('description', 'no source given')}; "
               f"{net['latency_us']} us, {net['bandwidth_GBps']} GB/s, {net.get('algorithm', 'rabenseifner')}; {shown(net['path'])})")
    if options.get("epochs") is not None:
        out.append(f"epochs: {options['epochs']:g}, given (--epochs: a fixed budget; the RCPs unused)")
    else:
        out.append(f"epochs to 75.9 %: MLPerf's reference convergence points, {shown(rcp['path'])}")
    if node.model != "resnet50":
        out.append(f"NOTE: the RCPs are ResNet-50's on ImageNet; this study's model is {node.model}")
    out.append(f"dataset: {options['train_images']} training, {options['val_images']} validation images; "
               f"evaluation after epoch {first_evaluation(options['eval_every'], options['eval_offset'])}, "
               f"then every {options['eval_every']} (--eval-every, --eval-offset); "
               + ("a run trains its --epochs and passes the evaluations within them" if options.get("epochs") is not None
                  else "a run trains to the first evaluation at or after the epochs it needs"))
    memory = options.get("node_memory_gb")
    out.append(f"node memory: {memory:g} GB ({options['memory_source']})" if memory else
               "node memory: NOT CHECKED (no --node-memory-gb and none in the network profile)")
    return out


def _exposed(r):
    return f"{1e3 * r['exposed_s']:.1f} ({1e3 * r['straggler_s']:.1f})"


def row_cells(r):
    if not r.get("images_per_second"):
        return [r["nodes"], r["ranks"], f"{r['global_batch']:g}", "-", "-", "-", "-", "-", "-", "-", r["refused"]]
    e = r.get("epochs")
    if e is None:
        return [r["nodes"], r["ranks"], f"{r['global_batch']:g}", f"{r['images_per_second']:.1f}",
                f"{r['efficiency']:.2f}", "-", "-", _exposed(r), "-", "-", r["refused"]]
    tts = (f"{_hours(r['tts_mean_s']):.2f} ({_hours(r['tts_min_s']):.2f}-{_hours(r['tts_max_s']):.2f})")
    note = ("**minimum**; " if r["best"] else "") + e["how"]
    return [r["nodes"], r["ranks"], f"{r['global_batch']:g}", f"{r['images_per_second']:.1f}",
            f"{r['efficiency']:.2f}", f"{e['mean']:.1f} ({e['min']:.1f}-{e['max']:.1f})",
            f"{r['trained_epochs_mean']:.1f} ({r['trained_epochs_min']:.1f}-{r['trained_epochs_max']:.1f})",
            _exposed(r), f"{r['eval_s']:.1f}", tts, note]


HEADER = ["nodes", "ranks", "global batch", "images/s", "efficiency", "epochs to target (band)", "epochs trained",
          "exposed allreduce ms/step (of it the slowest rank)", "eval s each", "time-to-solution h (band)", "note"]


def markdown(node, net, rcp, options, rows):
    lines = ["Inputs:", ""] + [f"- {line}" for line in input_lines(node, net, rcp, options)] + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---:|" * (len(HEADER) - 1) + "---|"]
    lines += ["| " + " | ".join(str(c) for c in row_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_json(node, net, rcp, options, rows):
    return {"inputs": input_lines(node, net, rcp, options), "options": options,
            "points": [{k: v for k, v in r.items() if k != "compute_source"} for r in rows]}
