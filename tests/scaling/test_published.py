"""The projection of published runs against hand-computed values: one run (MLPerf v2.1 Intel, 16
nodes) step by step from its table entry, ranks that share a node's link in a whole step, a fixed
epoch budget (--epochs) and its evaluations, a given compute spread (--node-spread), and the
table's refusals naming the file."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "scaling"))

from scaling_study.cli import main  # noqa: E402
from scaling_study.common import ScalingError  # noqa: E402
from scaling_study.model import predict_step  # noqa: E402
from scaling_study.node import NodeCompute  # noqa: E402
from scaling_study.project import evaluations_within, project  # noqa: E402
from scaling_study.published import check, load_published, within_target  # noqa: E402
from scaling_study.rcp import load_rcp  # noqa: E402


def node(ranks, compute_s, floats, share=0.5, spread=0.0, gradient_bytes=4):
    shape = {"backward_share": share, "ready_fractions": [1.0] * len(floats), "bucket_floats": list(floats),
             "parameters": 0, "activation_bytes_per_image": 0.0, "eval_s_per_image": 0.0, "model": "test",
             "overlap": True, "rank_cores": 2, "compute_spread": spread, "gradient_bytes": gradient_bytes}
    return NodeCompute(ranks, 1, {32: {"compute_s": compute_s, "data_wait_s": 0.0, "source": "test"}}, shape, {})


class RanksShareTheLink(unittest.TestCase):
    def test_two_ranks_a_node_each_reduce_at_half_the_nodes_bandwidth(self):
        # 100 MB, 4 nodes, 10 GB/s a node, no latency, after backward (ready at 1.0):
        # 1 rank a node: p = 4, 2 x 3/4 x 100e6 / 10e9 = 15 ms exposed;
        # 2 ranks a node: p = 8, each at 5 GB/s: 2 x 7/8 x 100e6 / 5e9 = 35 ms
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        one = predict_step(node(1, 1.0, [25_000_000]), net, 4, 32)
        two = predict_step(node(2, 1.0, [25_000_000]), net, 4, 32)
        self.assertAlmostEqual(one["exposed_s"], 0.015, places=12)
        self.assertAlmostEqual(two["exposed_s"], 0.035, places=12)
        self.assertAlmostEqual(two["images_per_second"], 8 * 32 / 1.035, places=9)

    def test_half_precision_gradients_halve_the_volume(self):
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        self.assertAlmostEqual(predict_step(node(1, 1.0, [25_000_000], gradient_bytes=2), net, 4, 32)["exposed_s"],
                               0.0075, places=12)


class GivenEpochsAndSpread(unittest.TestCase):
    def test_a_fixed_budget_trains_its_epochs_and_passes_the_evaluations_within_them(self):
        # evaluations after 3, 7, 11, ... (every 4, offset 2): 72.29 epochs pass 3..71 = 18 of them
        self.assertEqual(evaluations_within(72.29, 4, 2), 18)
        self.assertEqual(evaluations_within(2.5, 4, 2), 0)
        self.assertEqual(evaluations_within(3, 4, 2), 1)
        # 1 node, 32 images a step of 1 s: 32 images/s; 10 epochs of 320 images = 100 s, no evaluation
        n = node(1, 1.0, [1000])
        r = project(n, {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}, load_rcp(), [1], local_batch=32,
                    train_images=320, val_images=0, eval_every=4, eval_offset=2, epochs=10)[0]
        self.assertAlmostEqual(r["time_to_solution_s"], 100.0, places=9)
        self.assertEqual(r["epochs"]["how"], "given (--epochs)")

    def test_a_given_spread_is_marked_assumed_and_bounded(self):
        n = node(1, 1.0, [1000])
        n.take_given_spread(0.05)
        self.assertEqual(n.compute_spread, 0.05)
        self.assertIn("ASSUMED", n.sources["compute spread"])
        with self.assertRaisesRegex(ScalingError, "--node-spread 1.5"):
            n.take_given_spread(1.5)


class MlperfIntelByHand(unittest.TestCase):
    """MLPerf Training v2.1, Intel, 16 nodes x 2 ranks, global batch 3,264 (102 a rank), 534.8
    images/s a node; DDP buckets 50, 50, 2.2 MB of fp32; ring over 25 GB/s a node (12.5 a rank),
    3 us; backward 2/3 of compute; evaluations after 3, 7, ..., 50,000 images at a third of a
    training image's cost; RCP at 3,264: 11 of 15 reference runs stop at epoch 35, 4 at 39."""

    @classmethod
    def setUpClass(cls):
        run = next(r for r in load_published()["runs"] if r["id"] == "mlperf-v2.1-intel-spr-16")
        cls.node, cls.net, cls.rows = check(run)
        cls.row = cls.rows[0]

    def test_the_step(self):
        compute = 2 * 102 / 534.8
        backward = compute * 2 / 3
        beta, alpha, p = 25e9 / 2, 3e-6, 32
        cost = lambda nbytes: 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / beta  # noqa: E731
        end1 = 50 / 102.2 * backward + cost(50e6)           # bucket 1 ready at 50/102.2 of backward
        end2 = max(end1, 100 / 102.2 * backward) + cost(50e6)  # bucket 2 at 100/102.2
        end3 = max(end2, backward) + cost(2.2e6)            # bucket 3 at the end of backward
        exposed = end3 - backward
        p_row = self.row["projected"]
        self.assertAlmostEqual(p_row["exposed_ms"], 1e3 * exposed, places=6)
        self.assertAlmostEqual(p_row["images_per_second"], 3264 / (compute + exposed), places=4)

    def test_the_time_to_solution(self):
        compute = 2 * 102 / 534.8
        backward = compute * 2 / 3
        rate = 3264 / (compute + self.row["projected"]["exposed_ms"] / 1e3)
        eval_s = 50000 * (1 / 3 / 534.8) / 16
        epochs = (11 * 35 + 4 * 39) / 15
        tts = epochs * 1281167 / rate + ((epochs - 3) / 4 + 1) * eval_s
        own = 35 * 1281167 / rate + 9 * eval_s
        p_row = self.row["projected"]
        self.assertAlmostEqual(p_row["epochs"], epochs, places=9)
        self.assertAlmostEqual(p_row["tts_s"], tts, places=4)
        self.assertAlmostEqual(p_row["tts_own_epochs_s"], own, places=4)
        self.assertAlmostEqual(p_row["tts_error"], tts / 5317.2 - 1, places=9)
        self.assertLess(backward, compute)
        self.assertTrue(within_target(self.row))  # +2.7 % against the logs' 88.62 minutes


class EfficiencyOverTheInputsOwnPoint(unittest.TestCase):
    def test_the_allreduce_a_multi_node_rate_already_holds_cancels(self):
        # SURFsara 64 -> 448: the 64-node rate holds its own allreduce, which the model adds again;
        # efficiency is over the model's rate at 64 nodes, so the input's own point is exactly 1
        run = next(r for r in load_published()["runs"] if r["id"] == "surfsara-stampede2-64")
        node, net, rows = check(run)
        self.assertLess(rows[0]["projected"]["images_per_second"], 64 * 98.5)  # the allreduce added again
        self.assertAlmostEqual(rows[0]["projected"]["efficiency"], 1.0, places=12)


STUDY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "scaling", "results",
                     "resnet50-224-node-90e042d")


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


class Command(unittest.TestCase):
    def test_published_prints_each_point_beside_the_publication(self):
        code, out, _ = run_cli(["published", "--run", "mlperf-v2.1-intel-spr-16"])
        self.assertEqual(code, 0)
        self.assertIn("| mlperf-v2.1-intel-spr-16 | 16 | +2.7 % | - | within |", out)
        self.assertIn("12.5 GB/s a rank: its 2 rank(s) share the link", out)

    def test_an_unknown_run_is_refused_naming_it(self):
        code, _, err = run_cli(["published", "--run", "no-such-run"])
        self.assertEqual(code, 2)
        self.assertIn("--run no-such-run: no such run", err)

    def test_project_prints_the_given_epochs_and_spread_with_their_sources(self):
        code, out, _ = run_cli(["project", STUDY, "--network", "marenostrum4", "--node-images-per-second", "100",
                                "--ranks-per-node", "2", "--threads", "24", "--batch-size", "64", "--nodes", "1,2",
                                "--epochs", "72", "--node-spread", "0.05"])
        self.assertEqual(code, 0)
        self.assertIn("compute spread: 5.0 % of the step's compute, given (--node-spread): ASSUMED", out)
        self.assertIn("epochs: 72, given (--epochs: a fixed budget; the RCPs unused)", out)

    def test_a_trace_and_a_given_spread_together_are_refused(self):
        code, _, err = run_cli(["project", STUDY, "--network", "marenostrum4", "--node-spread", "0.05",
                                "--node-trace", os.path.join(STUDY, "runs", "nodes-1", "trace.rank0.json")])
        self.assertEqual(code, 2)
        self.assertIn("--node-trace and --node-spread both give the compute spread", err)


class Table(unittest.TestCase):
    def test_every_run_input_has_a_source(self):
        for run in load_published()["runs"]:
            for key in ("ranks_per_node", "threads_per_rank", "comm_cores", "gradients", "node", "evaluation",
                        "compute_spread", "network"):
                self.assertTrue(run[key].get("source"), f"{run['id']}: {key} without a source")
            for p in run["points"]:
                self.assertTrue(any(k.endswith("_source") for k in p["published"]), f"{run['id']}: unsourced outcome")

    def test_a_run_without_its_inputs_is_refused_naming_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.json")
            with open(path, "w") as f:
                json.dump({"runs": [{"id": "x", "points": []}]}, f)
            with self.assertRaisesRegex(ScalingError, f"{path}: run 'x' has no 'network'"):
                load_published(path)
            with open(path, "w") as f:
                f.write("{")
            with self.assertRaisesRegex(ScalingError, "runs.json: unreadable"):
                load_published(path)


if __name__ == "__main__":
    unittest.main()
