"""Scaling studies of nostrum-train across node counts, a model calibrated from measurements, and
the time-to-solution they project.

  scaling-study [run] --job jobs/X.ini --data DIR --nodes 1,2,4 --mode strong|weak
                [--ranks-per-node R] [--threads T] [--epochs E | --steps S] [--batch-size B]
                [--study DIR] [--site slurm/sites/S.env] [--link LABEL] [--trace] [--local]
                [--repeat K] [--fill-idle-nodes] [--parallel] [--no-wait] [--network P]
                [-- nostrum-train args]
      one job per node count through slurm/nostrum-train.sbatch (each after the previous one, so
      points never share nodes or the network), then the report. Strong scaling also runs a compute
      sweep: 1 node at each smaller local batch (--no-compute-sweep skips it). --fill-idle-nodes
      (for nodes that share one host, as the local cluster's): a point on fewer nodes than the
      largest runs beside a 1-node copy of its job on each idle node, so compute is measured with
      busy neighbours at every point.
  scaling-study report STUDY [--network P]
      STUDY/scaling.{md,csv}, throughput.png, efficiency.png, time_split.png; with --network the
      model's prediction of every point, compared with the measurement only when P was calibrated
      on the same cluster and --link label as the study. Exit 1 if a point failed.
  scaling-study calibrate --nodes 2 --out P.json [--site S.env] [--link LABEL] [--local]
      a network profile from nostrum-allreduce-bench: one allreduce of 0.25-25 MB on N nodes under
      Open MPI's choice, ring and Rabenseifner; latency and bandwidth per algorithm.
  scaling-study model STUDY --network P [--nodes 1,2,...] [--global-batch G]
      predicted step, exposed allreduce, images/s and efficiency per node count.
  scaling-study project STUDY --network P [--nodes 1,2,...,1024] [--node-images-per-second X
                --ranks-per-node R --threads T] [--node-memory-gb M] [--plot tts.png] [--md F]
      time-to-solution of ResNet-50 to 75.9 % at each node count: images/s, efficiency, global
      batch, epochs from MLPerf's RCPs (interpolated; the spread of the reference runs as a band;
      beyond the largest reference batch: out of range), the epochs trained (to the first
      evaluation at or after them: --eval-every 4 --eval-offset 2, the recipe's 3, 7, 11, ...),
      evaluation time, time-to-solution, the minimising node count; every input's source is printed.
      --epochs N: a run of a fixed epoch budget instead; --node-spread S: a compute spread given
      (ASSUMED) for a node without a trace.
  scaling-study published [--run ID,...] [--node-spread S] [--md F]
      every run of tools/scaling/published/runs.json (published multi-node ResNet-50 runs, each input
      with its source) projected from its own inputs, beside the publication: images/s, efficiency,
      time-to-solution per published node count, the error, and where the efficiency misses the
      compute spread that would close it (a diagnostic, not an input).

Inputs of the model, each measured (the output names the file it came from):
  compute and data wait per step: a 1-node point of the study at each local batch (not scaled
    linearly: small per-rank batches lose GEMM efficiency); or given for the target node
    (--node-images-per-second with its --ranks-per-node and --threads: project from one real node);
  backward's share of compute: the 1-node point's trace (run --trace);
  compute spread from step to step: the same trace (interquartile range / 1.349 over the median of
    its steps after the first and before the last, at least 8; none without: no straggler wait),
    or --node-trace: the trace of a 1-node run on the target node;
  gradient buckets: result.json's gradient_buckets (nostrum-train's own plan);
  each bucket's ready time in backward: a multi-rank point's trace ("bucket ready"; one rank has no
    allreducer, so these come from the smallest multi-rank point);
  latency and bandwidth: the network profile (calibrate, or a published one such as marenostrum4);
  activation bytes: result.json (a node whose ranks' batches do not fit --node-memory-gb is refused).
Model: step = compute + exposed + data wait; the buckets are reduced in order by one communication
thread, bucket k starting at max(its ready time, the previous bucket's end); exposed = the last
end after backward + the wait for the slowest of p ranks (spread x compute x E[max of p standard
normals]: 0.56 at 2 ranks, 1.03 at 4, 2.34 at 64, 3.25 at 1,024). One allreduce of n bytes over p ranks costs 2 ceil(log2 p) alpha + 2 (p-1)/p n /
beta (Rabenseifner; ring 2 (p-1) alpha + the same volume; tree 2 ceil(log2 p) (alpha + n / beta)),
beta = the node's bandwidth over its ranks.
Where a rank has no core beyond its T threads (result.json's rank_cores, overlap), the spinning
communication thread slows backward to T/(T+1) and the allreduce to the profile's
shared_core_comm_speed while a bucket is in flight.
Assumptions: no contention beyond a node's link, each rank's compute per step an independent
normal with the 1-node trace's median and spread (no correlated jitter, no heavy tail), compute per
step the same at N nodes as at 1 node apart from that shared core, the textbook cost of the allreduce algorithm at
node counts other than the calibration's, eval cost per image as measured on 1 node.
Measured error (local cluster, 2 isolated 1-CPU nodes, tbf-shaped link, weak scaling, the 1-node
  point beside a busy neighbour, 2026-12-01 16:08-16:20 UTC): resnet8 -11.9 % and ResNet-50 +0.4 %
  on 2 Gbit/s, resnet8 -6.4 % and ResNet-50 -2.2 % on 200 Mbit/s (exposed allreduce 36 % of the
  step). The wait for the slower rank brings the exposed time close to rank 0's measured one; what
  is left is compute, which on a shared host differs between 1-node and 2-node points both ways.
  Table and causes: slurm/README.md, "Measured error".
Against published runs (scaling-study published): time-to-solution within 5 % at 16 nodes (MLPerf
  v2.1/v3.0 Intel) and for the epoch arithmetic at 64 and 2,048 nodes, where the per-node rate is
  the run's own; against real scaling (EC2 64 to 128 nodes, Dell Zenith to 314, SURFsara 64 to 448)
  optimistic by 6.5-33 points: compute at small local batches, the shared fabric's contention and
  stragglers are not in it (tools/scaling/published/README.md).
Standard library and Debian's python3-matplotlib only.
"""
import argparse
import os
import sys

from .calibrate import calibrate
from .common import ScalingError, die, shown, write_json
from .network import load_network
from .node import from_study
from .plots import plot_projection
from .project import project
from .published import published_main
from .projection_report import input_lines, markdown, to_json
from .rcp import load_rcp
from .report import report_main
from .run import run
from .study import collect


def target_node(args):
    meta, rows, sweep = collect(os.path.abspath(args.study))
    node = from_study(meta, rows, sweep)
    if args.node_images_per_second:
        if not args.ranks_per_node or not args.threads:
            raise ScalingError("--node-images-per-second needs --ranks-per-node and --threads of the target node")
        batch = args.batch_size or min(node.batches)
        node = node.with_given_compute(args.node_images_per_second, args.ranks_per_node, args.threads, batch)
    if args.node_trace and args.node_spread is not None:
        raise ScalingError("--node-trace and --node-spread both give the compute spread: give one")
    if args.node_trace:
        node.take_spread_from(args.node_trace)
    if args.node_spread is not None:
        node.take_given_spread(args.node_spread)
    return node


def node_memory(args, net):
    if args.node_memory_gb:
        return args.node_memory_gb, "--node-memory-gb"
    if net.get("node_memory_GB"):
        return net["node_memory_GB"], f"node_memory_GB of {shown(net['path'])}"
    return None, None


def projection(args):
    node = target_node(args)
    net = load_network(args.network)
    rcp = load_rcp(args.rcp)
    memory, memory_source = node_memory(args, net)
    options = {"train_images": args.train_images, "val_images": args.val_images, "eval_every": args.eval_every,
               "eval_offset": args.eval_offset,
               "node_memory_gb": memory, "memory_source": memory_source,
               "local_batch": args.batch_size or min(node.batches), "global_batch": args.global_batch,
               "epochs": args.epochs}
    nodes = [int(n) for n in args.nodes.split(",")] if args.nodes else [2 ** k for k in range(11)]
    rows = project(node, net, rcp, nodes, local_batch=options["local_batch"], global_batch=args.global_batch,
                   train_images=args.train_images, val_images=args.val_images, eval_every=args.eval_every,
                   eval_offset=args.eval_offset, node_memory_gb=memory, epochs=args.epochs)
    return node, net, rcp, options, rows


def model_main(args):
    node, net, rcp, options, rows = projection(args)
    print("\n".join(input_lines(node, net, rcp, options)))
    print(f"{'nodes':>6} {'ranks':>6} {'local batch':>11} {'global batch':>12} {'step ms':>9} {'exposed ms':>10} "
          f"{'of it slowest rank':>18} {'images/s':>10} {'efficiency':>10}")
    for r in rows:
        if r.get("images_per_second"):
            print(f"{r['nodes']:>6} {r['ranks']:>6} {r['local_batch']:>11g} {r['global_batch']:>12g} "
                  f"{1e3 * r['step_s']:>9.2f} {1e3 * r['exposed_s']:>10.2f} {1e3 * r['straggler_s']:>18.2f} "
                  f"{r['images_per_second']:>10.1f} {r['efficiency']:>10.2f}")
        else:
            print(f"{r['nodes']:>6} {r['ranks']:>6} {r['local_batch']:>11g} {r['global_batch']:>12g}  refused: {r['refused']}")
    if args.json:
        write_json(args.json, to_json(node, net, rcp, options, rows))
    return 0


def project_main(args):
    node, net, rcp, options, rows = projection(args)
    text = markdown(node, net, rcp, options, rows)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    if args.json:
        write_json(args.json, to_json(node, net, rcp, options, rows))
    if args.plot:
        plot_projection(args.plot, rows, args.title or f"{node.model} on {net['name']}")
    if not any(r.get("best") for r in rows):
        print("scaling-study: no node count could be projected (see the notes)", file=sys.stderr)
        return 1
    return 0


def add_run(sub):
    r = sub.add_parser("run", help="submit one job per node count, wait, report")
    r.add_argument("--job", help="a nostrum-train INI file (jobs/*.ini)")
    r.add_argument("--data", help="dataset directory (nostrum-shards)")
    r.add_argument("--nodes", help="node counts, e.g. 1,2,4,8")
    r.add_argument("--mode", choices=("strong", "weak"), default="strong")
    r.add_argument("--ranks-per-node", type=int, default=1)
    r.add_argument("--threads", type=int, default=1, help="OpenMP threads per rank (--cpus-per-task)")
    r.add_argument("--batch-size", type=int, help="images per rank at the smallest point (default: the job's)")
    r.add_argument("--epochs", type=int)
    r.add_argument("--steps", type=int, help="train this many steps per point (nostrum-train --max-steps), then evaluate")
    r.add_argument("--study", help="study directory (default runs/scaling-<job>-<mode>)")
    r.add_argument("--site", help="site profile (slurm/sites/*.env)")
    r.add_argument("--link", help="a label of the network the study runs on (e.g. the tc profile); "
                   "a calibration with the same label is compared with the study")
    r.add_argument("--local", action="store_true", help="no Slurm: mpirun on this machine, one point after another")
    r.add_argument("--parallel", action="store_true", help="submit the points independently (may run at once)")
    r.add_argument("--exclusive", action="store_true", help="sbatch --exclusive")
    r.add_argument("--time-limit", help="sbatch -t for each point")
    r.add_argument("--trace", action="store_true", help="write a Chrome trace per rank (the model's backward profile)")
    r.add_argument("--no-compute-sweep", action="store_true", help="strong scaling: no 1-node runs at the smaller local batches")
    r.add_argument("--fill-idle-nodes", action="store_true",
                   help="run a 1-node copy of the job on each node a point leaves idle (nodes that share "
                        "one host, as the local cluster's, slow each other: every point then has busy neighbours)")
    r.add_argument("--repeat", type=int, default=1,
                   help="run every point this many times, alternating; the report takes each one's fastest")
    r.add_argument("--no-wait", action="store_true", help="submit and return")
    r.add_argument("--timeout", type=int, default=3600, help="seconds to wait for the jobs")
    r.add_argument("--network", help="report the model's prediction with this network profile")


def add_projection_options(m, default_nodes):
    m.add_argument("study", help="a study with a 1-node point of the job (compute, trace, buckets)")
    m.add_argument("--network", required=True, help="network profile (file, or a name in tools/scaling/profiles)")
    m.add_argument("--nodes", help=f"node counts (default {default_nodes})")
    m.add_argument("--batch-size", type=int, help="images per rank (default: the study's smallest measured)")
    m.add_argument("--global-batch", type=int, help="fixed global batch instead (local = global / ranks)")
    m.add_argument("--node-images-per-second", type=float, help="the target node's measured training images/s")
    m.add_argument("--ranks-per-node", type=int, help="the target node's ranks (with --node-images-per-second)")
    m.add_argument("--threads", type=int, help="the target node's threads per rank (with --node-images-per-second)")
    m.add_argument("--node-trace", help="trace.rank0.json of a 1-node run on the target node (at least 10 steps): "
                   "the compute spread from step to step, for the straggler wait (instead of the study's trace)")
    m.add_argument("--node-spread", type=float,
                   help="the compute spread from step to step as a fraction of compute (0.05: 5 %%), for a node "
                        "without a trace; printed as ASSUMED (instead of the study's trace)")
    m.add_argument("--epochs", type=float,
                   help="a run of this many epochs (a fixed budget, not to the RCP's 75.9 %%), its evaluations "
                        "those of the schedule within them")
    m.add_argument("--node-memory-gb", type=float, help="refuse points whose ranks' batches do not fit")
    m.add_argument("--rcp", default="mlperf_resnet_rcp", help="RCP table (file, or a name in tools/scaling/rcp)")
    m.add_argument("--train-images", type=int, default=1_281_167, help="images an epoch (ImageNet-1k's)")
    m.add_argument("--val-images", type=int, default=50_000, help="images an evaluation (ImageNet-1k's)")
    m.add_argument("--eval-every", type=int, default=4, help="epochs between evaluations (MLPerf ResNet's 4)")
    m.add_argument("--eval-offset", type=int, default=2,
                   help="as nostrum-train's: evaluations after epochs K+1, K+1+N, ... (default 2, the ResNet-50 "
                        "recipe's, jobs/resnet50_imagenet_mlperf.ini: 3, 7, 11, ...; -1: N, 2N, ...)")
    m.add_argument("--json", help="write the projection as JSON")


def parser():
    p = argparse.ArgumentParser(prog="scaling-study", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command")
    add_run(sub)
    r = sub.add_parser("report", help="tables and plots from a study directory")
    r.add_argument("study")
    r.add_argument("--network", help="network profile (file, or a name in tools/scaling/profiles)")
    m = sub.add_parser("model", help="predict step time, images/s and efficiency")
    add_projection_options(m, "1,2,...,1024")
    j = sub.add_parser("project", help="time-to-solution against nodes, with MLPerf's convergence data")
    add_projection_options(j, "1,2,...,1024")
    j.add_argument("--plot", help="write time-to-solution against nodes (with the band) as this PNG")
    j.add_argument("--md", help="write the inputs and the table as Markdown")
    j.add_argument("--title", help="the plot's title")
    q = sub.add_parser("published", help="project the published multi-node runs from their own inputs, "
                       "beside the publication")
    q.add_argument("--table", help="the runs table (default tools/scaling/published/runs.json)")
    q.add_argument("--run", help="only these run ids (comma-separated)")
    q.add_argument("--node-spread", type=float, help="a compute spread for every run (ASSUMED: none is published)")
    q.add_argument("--rcp", default="mlperf_resnet_rcp", help="RCP table (file, or a name in tools/scaling/rcp)")
    q.add_argument("--md", help="write the output to this file too")
    c = sub.add_parser("calibrate", help="network profile from nostrum-allreduce-bench")
    c.add_argument("--nodes", type=int, default=2)
    c.add_argument("--out", required=True)
    c.add_argument("--name", default="local cluster (calibrated)")
    c.add_argument("--link", help="a label of the network (e.g. the tc profile), as given to run --link")
    c.add_argument("--site")
    c.add_argument("--bench")
    c.add_argument("--sizes-mb", default="0.25,1,4,25", help="allreduce sizes to time (MB)")
    c.add_argument("--steps", type=int, default=3, help="timed allreduces per size (after one warm-up)")
    c.add_argument("--local", action="store_true", help="no Slurm: mpirun on this machine")
    c.add_argument("--timeout", type=int, default=600, help="seconds the benchmark may take (each job)")
    return p


def main(argv):
    commands = ("run", "report", "model", "project", "published", "calibrate")
    if not argv or argv[0] not in commands + ("-h", "--help"):
        argv = ["run"] + argv
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = parser().parse_args(argv)
    args.extra = extra
    handlers = {"run": lambda: run(args, report_main), "report": lambda: report_main(args.study, args.network),
                "model": lambda: model_main(args), "project": lambda: project_main(args),
                "published": lambda: published_main(args),
                "calibrate": lambda: calibrate(args)}
    try:
        return handlers[args.command]()
    except ScalingError as e:
        die(str(e))
