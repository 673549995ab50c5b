#!/usr/bin/python3
"""--conv-kernel end to end, 2 ranks: `measure` times every candidate on both ranks at once (the
table pools their times, is printed with --verbose and written to result.json, each row's choice
the fastest of its times) and writes the cache; `cached` then takes every choice from it without measuring and gives a bitwise identical
run (same weights checksum); a flipped byte in the cache is refused naming the file and measured
again; a forced candidate runs wherever it fits; ranks of two ISAs (one capped at AVX2) pool a table of
the candidates both can run; an unknown name is refused naming the option."""
import json
import os
import subprocess
import tempfile

from e2e_common import ROOT, check, fmnist_subset, mpirun, scaled, train_binary


def rows(result_path):
    return json.load(open(result_path))["conv_kernels"]["rows"]


def main():
    data = fmnist_subset(4000, 1000)
    work = tempfile.mkdtemp(prefix="nostrum-conv-kernels-")
    cache = os.path.join(work, "cache", "conv.json")
    common = ["--data", data, "--model", "resnet8", "--width", "16", "--batch-size", "32",
              "--threads", "1", "--loader-threads", "1", "--max-steps", "6", "--epochs", "1",
              "--target-accuracy", "0.99", "--conv-cache", cache, "--verbose"]

    first = os.path.join(work, "measure.json")
    proc = mpirun(2, common + ["--conv-kernel", "measure", "--result-json", first])
    check(proc.returncode == 2, f"the measured run ends its step budget (exit 2, got {proc.returncode})")
    measured = rows(first)
    check(len(measured) > 0 and all(r["source"] == "measured" for r in measured),
          f"result.json holds {len(measured)} measured rows")
    for r in measured:
        fastest = min(r["timings"], key=lambda t: t["seconds"])  # min keeps the first of a tie
        check(r["chosen"] == fastest["candidate"],
              f"{r['shape']} {r['pass']}: chose {r['chosen']}, the fastest of its timings")
    check(proc.stdout.count("(measured)") == len(measured),
          "--verbose prints one table line per measured row")
    table = json.load(open(first))["conv_kernels"]
    check(table["ranks"] == 2, "both ranks measured; the table pools their times")
    check(len(table["rank_seconds"]) == 2 and all(s > 0 for s in table["rank_seconds"]),
          f"each rank's own time for the pooled choices: {table['rank_seconds']}")
    check("on 2 ranks at once (their medians)" in proc.stdout,
          "the start-up line says the table pools both ranks' measurements")
    check(os.path.exists(cache), "the cache file is written")

    second = os.path.join(work, "cached.json")
    proc = mpirun(2, common + ["--conv-kernel", "cached", "--result-json", second])
    check(proc.returncode == 2, "the cached run ends its step budget")
    cached = rows(second)
    check(all(r["source"] == "cached" for r in cached), "every row comes from the cache")
    check([r["chosen"] for r in cached] == [r["chosen"] for r in measured],
          "the cached run runs the measured run's kernels")
    check("from the cache" in proc.stdout, "the start-up line says the choice came from the cache")
    a, b = json.load(open(first)), json.load(open(second))
    check(a["weights_checksum"] == b["weights_checksum"],
          f"same cache, same kernels: bitwise identical weights ({a['weights_checksum']})")

    text = bytearray(open(cache, "rb").read())
    text[len(text) // 3] ^= 0x01
    open(cache, "wb").write(bytes(text))
    third = os.path.join(work, "damaged.json")
    proc = mpirun(2, common + ["--conv-kernel", "cached", "--result-json", third])
    check(proc.returncode == 2, "a damaged cache does not stop the run")
    check(cache in proc.stdout and "refused" in proc.stdout and "measuring again" in proc.stdout,
          "the damaged cache is named, refused and measured again")
    check(all(r["source"] == "measured" for r in rows(third)), "its rows were measured again")

    forced = os.path.join(work, "forced.json")
    proc = mpirun(2, common + ["--conv-kernel", "gemm_openblas", "--result-json", forced])
    check(proc.returncode == 2, "a forced candidate runs")
    check(all(r["chosen"] == "gemm_openblas" and r["source"] == "forced" for r in rows(forced)),
          "gemm_openblas runs every pass (it fits every shape)")

    # Ranks whose CPUs differ (rank 1 capped at AVX2, as a node with an older CPU would be): every
    # rank measures, and the pooled table keeps only the candidates every rank can run.
    # Every candidate that needs AVX-512 says so in its name (direct_avx512, gemm_fp32_avx512*).
    def needs_avx512(name):
        return "avx512" in name
    if "avx512f" in open("/proc/cpuinfo").read().split():
        check(any(needs_avx512(t["candidate"]) for r in measured for t in r["timings"]),
              "on this AVX-512 CPU, uncapped ranks measure the AVX-512 candidates")
    mixed = os.path.join(work, "mixed.json")
    args = [("none" if a == cache else a) for a in common]
    args += ["--conv-kernel", "measure", "--result-json", mixed]
    cmd = ([os.path.join(ROOT, "tools", "mpirun"), "-n", "1", train_binary()] + args +
           [":", "-n", "1", "-x", "NOSTRUM_MAX_ISA=avx2", train_binary()] + args)
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(600))
    print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n", flush=True)
    check(proc.returncode == 2, f"ranks of two ISAs train (exit 2, got {proc.returncode})")
    table = json.load(open(mixed))["conv_kernels"]
    check(table["ranks"] == 2, "both ranks measured")
    names = {t["candidate"] for r in table["rows"] for t in r["timings"]} | \
        {r["chosen"] for r in table["rows"]}
    check(not any(needs_avx512(n) for n in names),
          f"the pooled table holds only candidates the AVX2 rank can run: {sorted(names)}")

    proc = mpirun(1, common + ["--conv-kernel", "fastest-please"])
    check(proc.returncode == 1 and "--conv-kernel" in proc.stderr + proc.stdout,
          "an unknown --conv-kernel is refused naming the option")


if __name__ == "__main__":
    main()
