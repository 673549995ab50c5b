#!/usr/bin/python3
"""nostrum against PyTorch on the issue's benchmark cases, interleaved in one invocation: per case
the SGEMM ceiling probe, nostrum-bench, and PyTorch, the order alternating between rounds so that
drifting machine load favours neither side. nostrum maps its large buffers on transparent huge
pages (NOSTRUM_HUGE_PAGES, on by default); PyTorch's configurations are NCHW and channels_last,
each with glibc's malloc plain and advising huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1;
--torch-huge-pages off: plain only). A selection round (round 0) runs nostrum once (it measures the
conv table where no cache has it) and every PyTorch configuration; the --rounds compared rounds
after it run nostrum and PyTorch's fastest configuration of the selection round, one run a side
each, and the ratio is each side's best over the compared rounds: the same number of draws a side
(compare_rounds.py says why). The table prints beside it the ratio of the compared rounds' medians
and that of each side's best over every run, the selection round's included.

Usage: tools/bench/compare.py [--build build] [--cases 1,2,3] [--threads 2] [--rounds 1]
                              [--blas avx512|env|both] [--steps K] [--warmup W] [--layers]
                              [--bf16]
                              [--conv-kernel measure|cached|fixed|NAME]
                              [--max-isa avx2|avx512|avx512_bf16|amx] [--torch-huge-pages both|off]
--max-isa caps both sides at one instruction-set level: nostrum by NOSTRUM_MAX_ISA, PyTorch by
DNNL_MAX_CPU_ISA (oneDNN) and ATEN_CPU_CAPABILITY (ATen's own kernels), OpenBLAS by
OPENBLAS_CORETYPE=Haswell under avx2 (above it, as --blas says); the table's heading prints the cap
and the ISA oneDNN's verbose log says PyTorch's convolutions ran (one extra 1-step run per case).
--bf16 adds the bf16 columns: nostrum --precision bf16, PyTorch bf16 autocast (best of NCHW and
channels_last), and the bf16 dot-product ceiling (vdpbf16ps in registers, nostrum-conv-bench's
probe), all interleaved with the fp32 runs in the same rounds.
--conv-kernel (default cached) goes to nostrum-bench: each conv pass's kernel as nostrum-train
chooses it; the closing table lists the kernels each case ran.
Cases: 1 resnet50 224x224x3 batch 32; 2 resnet8 28x28x1 batch 128 (10 classes); 3 resnet50 64x64x3
batch 64. Prints every JSON line it collects, then the table of ratios.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_rounds  # noqa: E402
from blas_env import blas_env  # noqa: E402

CASES = {
    "1": dict(model="resnet50", image="224x224x3", batch=32, steps=3),
    "2": dict(model="resnet8", image="28x28x1", batch=128, steps=10),
    "3": dict(model="resnet50", image="64x64x3", batch=64, steps=5),
}


def run_json(cmd, env, show_profile=False):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    if show_profile:
        print("\n".join(l for l in out.splitlines() if l.startswith("#")), flush=True)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def probe_line(build, env):
    out = subprocess.run([os.path.join(build, "tools", "bench", "nostrum-conv-bench"), "--only",
                          "-", "--repeats", "3"], env=env, check=True, capture_output=True,
                         text=True).stdout.splitlines()[0]
    # "# nostrum-conv-bench: threads T, openblas core X, SGEMM 2048^3 G GFLOP/s, BF16-DOT D GFLOP/s,
    #  AMX-TILE A GFLOP/s, BF16-GEMM 2048^3 B GFLOP/s, ..."
    return out


def sgemm_gflops(build, env):
    out = probe_line(build, env)
    return float(out.split("SGEMM 2048^3")[1].split()[0]), out.split("openblas core")[1].split(",")[0].strip()


def bf16_ceiling_gflops(build, env):
    """The bf16 register ceiling: the vdpbf16ps probe, or the AMX tile probe where it is faster
    (Sapphire Rapids and later, where oneDNN's bf16 primitives run on the tiles)."""
    line = probe_line(build, env)
    dot = float(line.split("BF16-DOT")[1].split()[0])
    amx = float(line.split("AMX-TILE")[1].split()[0])
    return (amx, "AMX-TILE") if amx > dot else (dot, "BF16-DOT")


# --max-isa: oneDNN's and ATen's names for each level.
DNNL_ISA = {"avx2": "AVX2", "avx512": "AVX512_CORE", "avx512_bf16": "AVX512_CORE_BF16",
            "amx": "AVX512_CORE_AMX"}
ATEN_CAPABILITY = {"avx2": "avx2", "avx512": "avx512", "avx512_bf16": "avx512", "amx": "avx512"}


def torch_env(env, huge_pages):
    """PyTorch's environment; huge_pages: glibc's malloc advises its large blocks for transparent
    huge pages (the tunable glibc.malloc.hugetlb=1, glibc 2.35 and later), as nostrum maps its
    arenas (NOSTRUM_HUGE_PAGES); PyTorch 1.13 has no switch of its own."""
    if not huge_pages:
        return env
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t]
    return dict(env, GLIBC_TUNABLES=":".join(tunables + ["glibc.malloc.hugetlb=1"]))


def cap_env(env, cap):
    """Both sides capped at `cap` (None: env unchanged)."""
    if cap is None:
        return env
    env = dict(env)
    env["NOSTRUM_MAX_ISA"] = cap
    env["DNNL_MAX_CPU_ISA"] = DNNL_ISA[cap]
    env["ATEN_CPU_CAPABILITY"] = ATEN_CAPABILITY[cap]
    if cap == "avx2":
        env["OPENBLAS_CORETYPE"] = "Haswell"  # what nostrum's own re-exec picks under this cap
    return env


def cap_heading(env):
    return ", ".join(f"{k}={env.get(k, '(unset)')}" for k in
                     ("NOSTRUM_MAX_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE"))


def torch_conv_isas(common, env):
    """The oneDNN implementations PyTorch's convolutions ran (its verbose log), e.g. {"jit:avx2"}."""
    env = dict(env, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    args = common[:common.index("--steps")] + ["--steps", "1", "--warmup", "0"]
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torch_bench.py")] + args,
                         env=env, check=True, capture_output=True, text=True).stdout
    isas = set()
    for line in out.splitlines():
        fields = line.split(",")
        if len(fields) > 5 and fields[0].endswith("_verbose") and fields[1] == "exec" \
                and fields[3] == "convolution":
            isas.add(fields[4])
    return isas


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--cases", default="1,2,3")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1,
                        help="compared rounds after the selection round (one run a side each)")
    parser.add_argument("--blas", default="avx512", choices=["avx512", "env", "both"])
    parser.add_argument("--steps", type=int, default=0, help="timed steps (0: per-case default)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed steps first, both sides (PyTorch's second step at 224 was "
                             "still 20 %% slower than its third)")
    parser.add_argument("--bf16", action="store_true",
                        help="add nostrum bf16, PyTorch bf16 autocast and the bf16 dot ceiling")
    parser.add_argument("--layers", action="store_true",
                        help="nostrum-bench --layers: print nostrum's per-layer profile too")
    parser.add_argument("--conv-kernel", default="cached",
                        help="nostrum-bench --conv-kernel: measure | cached | fixed | a candidate")
    parser.add_argument("--max-isa", choices=sorted(DNNL_ISA), default=None,
                        help="cap both sides at this instruction-set level")
    parser.add_argument("--torch-huge-pages", default="both", choices=["both", "off"],
                        help="PyTorch with and without glibc's huge-page tunable (best of both), "
                             "or without only")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds: at least one compared round")
    torch_huge_pages = (False, True) if args.torch_huge_pages == "both" else (False,)
    conv_isas = {}  # case -> oneDNN convolution implementations PyTorch ran under the cap
    modes = ["avx512", "env"] if args.blas == "both" else [args.blas]
    bench = os.path.join(args.build, "tools", "bench", "nostrum-bench")
    # Bests over the compared rounds and "every" (summarise).
    results = []  # (mode, case, ours, theirs, ceiling, core, every)
    bf16_results = []  # (case, ours fp32, ours bf16, theirs bf16, bf16 ceiling, its probe, every)
    for mode in modes:
        env = cap_env(blas_env(mode), args.max_isa)
        env["OMP_NUM_THREADS"] = str(args.threads)
        print("# cap: " + cap_heading(env), flush=True)
        for case in args.cases.split(","):
            spec = CASES[case]
            steps = str(args.steps or spec["steps"])
            common = ["--model", spec["model"], "--image", spec["image"], "--batch",
                      str(spec["batch"]), "--threads", str(args.threads), "--steps", steps,
                      "--warmup", str(args.warmup)]
            ours_only = ["--conv-kernel", args.conv_kernel]
            ours, theirs, ceilings, core = [], [], [], ""
            if args.max_isa:
                conv_isas[case] = torch_conv_isas(common, env)
                print(f"# PyTorch's oneDNN convolutions ran: {sorted(conv_isas[case])}", flush=True)
            ours16, theirs16, dots = [], [], []
            selected = {}  # "fp32" / "bf16" -> PyTorch's configuration for the compared rounds
            # Round 0 selects PyTorch's configuration (every format x allocator); rounds 1 to
            # --rounds compare one run a side (compare_rounds.py).
            for r in range(args.rounds + 1):
                def run_ours(into, extra):
                    run = run_json([bench] + common + ours_only + extra, env, args.layers)
                    run["round"] = r
                    into.append(run)
                    print(json.dumps(run), flush=True)

                def run_torch(into, extra, precision):
                    configs = [(fmt, huge) for fmt in ("nchw", "channels_last")
                               for huge in torch_huge_pages] if r == 0 else [selected[precision]]
                    for fmt, huge in configs:
                        run = run_json(["/usr/bin/python3", os.path.join(HERE, "torch_bench.py")]
                                       + common + ["--format", fmt] + extra,
                                       torch_env(env, huge))
                        if huge:
                            run["format"] += " + huge pages"
                        run["config"], run["round"] = (fmt, huge), r
                        into.append(run)
                        print(json.dumps(run), flush=True)

                order = [lambda: run_ours(ours, ["--layers"] if args.layers else []),
                         lambda: run_torch(theirs, [], "fp32")]
                if args.bf16:
                    order += [lambda: run_ours(ours16, ["--precision", "bf16"]),
                              lambda: run_torch(theirs16, ["--precision", "bf16"], "bf16")]
                g, core = sgemm_gflops(args.build, env)
                ceilings.append(g)
                if r % 2 == 1:
                    order.reverse()
                for fn in order:
                    fn()
                if args.bf16:
                    dots.append(bf16_ceiling_gflops(args.build, env))
                g, core = sgemm_gflops(args.build, env)
                ceilings.append(g)
                if r == 0:
                    selected["fp32"] = compare_rounds.chosen_config(theirs)
                    if args.bf16:
                        selected["bf16"] = compare_rounds.chosen_config(theirs16)
            # Peak RSS: of the runs that read the conv table from the cache (a measuring run holds
            # the measurement's buffers too), whichever round was fastest.
            for runs in (ours, ours16):
                steady = [x["peak_rss_mb"] for x in runs if not x.get("conv_measured")] or \
                    [x["peak_rss_mb"] for x in runs]
                for x in runs:
                    x["steady_rss_mb"] = max(steady)
            best_ours, best_theirs, every = summarise(ours, theirs)
            results.append((mode, case, best_ours, best_theirs, statistics.median(ceilings), core,
                            every))
            if args.bf16:
                best16, best_theirs16, every16 = summarise(ours16, theirs16)
                bf16_results.append((case, best_ours, best16, best_theirs16,
                                     statistics.median(d for d, _ in dots), dots[-1][1], every16))

    print()
    if args.max_isa:
        print(f"Capped at {args.max_isa}: {cap_heading(env)}; nostrum's kernels ran "
              + "; ".join(sorted({o.get('kernels_ran', '?') for _, _, o, _, _, _, _ in results}))
              + "; PyTorch's oneDNN convolutions ran "
              + ", ".join(sorted(set().union(*conv_isas.values())) or ["(none logged)"]))
        print()
    print(f"Best of the {args.rounds} compared round(s) a side, PyTorch in the configuration its "
          f"selection round ran fastest; beside it the ratio of the compared rounds' medians, "
          f"and of each side's best over every run, the selection round's included "
          f"(compare_rounds.py)")
    print()
    print(f"| case | BLAS | nostrum img/s | PyTorch img/s (format) | ratio | "
          f"ratio of medians / best of all runs | nostrum GFLOP/s | SGEMM GFLOP/s | % of SGEMM | "
          f"RSS nostrum / PyTorch MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, case, o, t, ceiling, core, every in results:
        spec = CASES[case]
        print(f"| {case}: {spec['model']} {spec['image']} b{spec['batch']} | {core} | "
              f"{o['images_per_second']:.2f} | {t['images_per_second']:.2f} ({t['format']}) | "
              f"{o['images_per_second'] / t['images_per_second']:.2f} | {all_runs_text(every)} | "
              f"{o['gflops']:.1f} | {ceiling:.1f} | {100 * o['gflops'] / ceiling:.0f} | "
              f"{o['steady_rss_mb']:.0f} / {t['peak_rss_mb']:.0f} |")

    if bf16_results:
        print()
        print("| case | nostrum fp32 img/s | nostrum bf16 img/s | bf16 / fp32 | PyTorch bf16 img/s "
              "(format) | nostrum bf16 / PyTorch bf16 | ratio of medians / best of all runs | "
              "nostrum bf16 GFLOP/s | "
              "bf16 ceiling GFLOP/s (probe) | % of ceiling | RSS fp32 / bf16 MB |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for case, o32, o16, t16, dot, probe, every in bf16_results:
            spec = CASES[case]
            print(f"| {case}: {spec['model']} {spec['image']} b{spec['batch']} | "
                  f"{o32['images_per_second']:.2f} | {o16['images_per_second']:.2f} | "
                  f"{o16['images_per_second'] / o32['images_per_second']:.2f} | "
                  f"{t16['images_per_second']:.2f} ({t16['format']}) | "
                  f"{o16['images_per_second'] / t16['images_per_second']:.2f} | "
                  f"{all_runs_text(every)} | {o16['gflops']:.1f} | "
                  f"{dot:.1f} ({probe}) | {100 * o16['gflops'] / dot if dot else 0:.0f} | "
                  f"{o32['steady_rss_mb']:.0f} / {o16['steady_rss_mb']:.0f} |")

    print_chosen_kernels(results, bf16_results)


# One precision's runs of a case beyond the compared rounds' bests: each side's best run over all
# its runs (the selection round included), how many runs each side made, and the ratio of the
# compared rounds' medians.
AllRuns = collections.namedtuple("AllRuns", "ours_best theirs_best ours_runs theirs_runs "
                                            "median_ratio")


def summarise(ours, theirs):
    """One precision's runs of a case: (nostrum's best compared run, marked with the run that
    measured the conv table, PyTorch's best compared run, AllRuns)."""
    best_ours, best_theirs = compare_rounds.compared_best(ours, theirs)
    best_ours["measured_by"] = ours[0]
    ours_best, theirs_best = compare_rounds.best_of_all(ours, theirs)
    every = AllRuns(ours_best, theirs_best, len(ours), len(theirs),
                    compare_rounds.compared_median_ratio(ours, theirs))
    return best_ours, best_theirs, every


def all_runs_text(every):
    """The ratio of the compared rounds' medians, then that of each side's best over every run:
    '1.18 / 1.10 (of 3 / 6 runs)', the counts nostrum's / PyTorch's."""
    best_ratio = every.ours_best["images_per_second"] / every.theirs_best["images_per_second"]
    return f"{every.median_ratio:.2f} / {best_ratio:.2f} " \
           f"(of {every.ours_runs} / {every.theirs_runs} runs)"


def kernels_text(o):
    """'direct_avx512 x15, gemm_openblas x8 (cached)' from one nostrum-bench JSON line; the
    measurement's size and time from the run that measured the table (`measured_by`), if one did."""
    chosen = o.get("conv_kernels")
    if chosen is None:
        return "not recorded"
    how = f"--conv-kernel {o.get('conv_kernel', '?')}"
    m = o.get("measured_by", o)
    if m.get("conv_measured"):
        how += f", {m['conv_measured']} of {m['conv_passes']} passes measured in " \
               f"{m['conv_measure_seconds']:.1f} s"
    return ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())) + f" ({how})"


def print_chosen_kernels(results, bf16_results):
    print()
    print("| case | precision | conv kernels chosen (passes each) |")
    print("|---|---|---|")
    for mode, case, o, t, ceiling, core, _ in results:
        spec = CASES[case]
        print(f"| {case}: {spec['model']} {spec['image']} b{spec['batch']} ({core}) | fp32 | "
              f"{kernels_text(o)} |")
    for case, o32, o16, t16, _, _, _ in bf16_results:
        spec = CASES[case]
        print(f"| {case}: {spec['model']} {spec['image']} b{spec['batch']} | bf16 | "
              f"{kernels_text(o16)} |")


if __name__ == "__main__":
    main()
