#!/usr/bin/python3
"""One evaluated model: 2 ranks train (each with its own batch-norm running statistics, which the
trainer averages over the ranks before every evaluation and before saving); the run ends with
bit-identical weights and BN buffers on both ranks (their checksums in the result JSON), and
`--eval-only` on the saved weights reports exactly the accuracy the run reported last, on 2 ranks
and on 1."""
import json
import os
import tempfile

from e2e_common import check, fmnist_subset, mpirun


def main():
    data = fmnist_subset(4000, 1000)
    work = tempfile.mkdtemp(prefix="nostrum-one-model-")
    weights, result = os.path.join(work, "weights.h5"), os.path.join(work, "result.json")
    common = ["--conv-kernel", "fixed",  # one trajectory, whatever a measurement would pick
              "--data", data, "--model", "resnet8", "--width", "8", "--batch-size", "32",
              "--threads", "1", "--loader-threads", "1", "--quiet"]
    proc = mpirun(2, common + ["--epochs", "2", "--target-accuracy", "0.99", "--lr", "0.1",
                               "--save-weights", weights, "--result-json", result])
    check(proc.returncode == 2, f"the run ends its budget without the target (exit 2, got {proc.returncode})")
    r = json.load(open(result))
    check(len(r["evals"]) == 2, "two evaluations reported")
    check(r["evals"][-1]["accuracy"] == r["final_accuracy"], "final accuracy is the last evaluation's")
    check(len(r["buffers_checksum"]) > 0 and r["buffers_checksum"] != "0",
          "the result carries the (rank-identical) BN buffer checksum")

    for ranks in (2, 1):
        scored = os.path.join(work, f"eval{ranks}.json")
        proc = mpirun(ranks, common + ["--eval-only", "--init-weights", weights,
                                       "--result-json", scored])
        check(proc.returncode == 0, f"--eval-only on {ranks} rank(s) exits 0")
        e = json.load(open(scored))
        check(e["status"] == "evaluated", "status evaluated")
        check(e["final_accuracy"] == r["final_accuracy"],
              f"--eval-only on {ranks} rank(s) scores the saved weights {e['final_accuracy']} "
              f"== the run's last accuracy {r['final_accuracy']}")


if __name__ == "__main__":
    main()
