"""The scaling model's arithmetic against hand-computed values: one allreduce per algorithm, the
link a node count sees, the exposed allreduce of bucketed gradients, one predicted step, the node
compute table (measured, interpolated, refused), the RCP interpolation and its out-of-range
refusal, the time-to-solution and the node count that minimises it, the calibration fit, the
trace's bucket ready times and the copies of a job that keep a study's idle nodes busy."""
import argparse
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "scaling"))

from scaling_study.calibrate import bench_script, fit, parse, shared_core_speeds  # noqa: E402
from scaling_study.common import ScalingError  # noqa: E402
from scaling_study.model import (allreduce_seconds, expected_max_of_normals, link, overlapped_backward,  # noqa: E402
                                 predict_step)
from scaling_study.node import NodeCompute  # noqa: E402
from scaling_study.project import project, stopping_epoch, time_to_solution  # noqa: E402
from scaling_study.rcp import epochs_at, load_rcp  # noqa: E402
from scaling_study.run import filler_points, plan_points  # noqa: E402
from scaling_study.trace import trace_profile  # noqa: E402


def node(batches, share=1.0, floats=(250,), ready=(1.0,), ranks=1, act=0.0, params=0, eval_s=0.0, overlap=True,
         rank_cores=2, spread=0.0):
    shape = {"backward_share": share, "ready_fractions": list(ready), "bucket_floats": list(floats),
             "parameters": params, "activation_bytes_per_image": act, "eval_s_per_image": eval_s, "model": "test",
             "overlap": overlap, "rank_cores": rank_cores, "compute_spread": spread}
    table = {b: {"compute_s": c, "data_wait_s": d, "source": "test"} for b, (c, d) in batches.items()}
    return NodeCompute(ranks, 1, table, shape, {})


class AllreduceCost(unittest.TestCase):
    # 100 MB over 4 ranks, 10 us latency, 10 GB/s: volume term 2 x 3/4 x 100e6 / 10e9 = 15 ms
    n, p, alpha, beta = 100e6, 4, 10e-6, 10e9

    def cost(self, algorithm, p=None):
        return allreduce_seconds(self.n, p or self.p, self.alpha, self.beta, algorithm)

    def test_ring(self):
        self.assertAlmostEqual(self.cost("ring"), 6 * 10e-6 + 0.015, places=12)

    def test_rabenseifner(self):
        self.assertAlmostEqual(self.cost("rabenseifner"), 4 * 10e-6 + 0.015, places=12)

    def test_rabenseifner_three_ranks_rounds_the_steps_up(self):
        self.assertAlmostEqual(self.cost("rabenseifner", 3), 4 * 10e-6 + 2 * 2 / 3 * 0.01, places=12)

    def test_recursive_doubling(self):
        self.assertAlmostEqual(self.cost("recursive_doubling"), 2 * (10e-6 + 0.01), places=12)

    def test_tree(self):
        self.assertAlmostEqual(self.cost("tree"), 4 * (10e-6 + 0.01), places=12)

    def test_one_rank_costs_nothing(self):
        self.assertEqual(self.cost("ring", 1), 0.0)

    def test_unknown_algorithm_is_refused(self):
        with self.assertRaises(ScalingError):
            self.cost("bruck")


class SlowestOfP(unittest.TestCase):
    def test_expected_maximum_of_standard_normals(self):
        self.assertEqual(expected_max_of_normals(1), 0.0)
        self.assertAlmostEqual(expected_max_of_normals(2), 1 / math.sqrt(math.pi), places=9)
        self.assertAlmostEqual(expected_max_of_normals(3), 3 / (2 * math.sqrt(math.pi)), places=9)
        # 5 has no closed form; its tabulated value (Tippett 1925, Teichroew 1956): 1.16296
        self.assertAlmostEqual(expected_max_of_normals(5), 1.16296, places=5)


class Link(unittest.TestCase):
    net = {"latency_us": 2.0, "bandwidth_GBps": 10.0, "intra_node_bandwidth_GBps": 40.0,
           "algorithms": {"ring": {"latency_us": 5.0, "bandwidth_GBps": 8.0}}}

    def test_a_nodes_ranks_share_its_bandwidth(self):
        alpha, beta, alg = link(self.net, 4, 2)
        self.assertAlmostEqual(alpha, 2e-6, places=15)
        self.assertEqual((beta, alg), (5e9, "rabenseifner"))

    def test_one_node_uses_the_intra_node_bandwidth(self):
        self.assertEqual(link(self.net, 1, 4)[1], 40e9)

    def test_figures_per_algorithm(self):
        alpha, beta, alg = link(self.net, 2, 1, "ring")
        self.assertAlmostEqual(alpha, 5e-6, places=15)
        self.assertEqual((beta, alg), (8e9, "ring"))


class Overlap(unittest.TestCase):
    def test_buckets_in_order_each_after_its_ready_time(self):
        # backward 1 s; bucket 0 ready at 0.5 s takes 0.3 s (ends 0.8), bucket 1 ready at 1.0 takes 0.2
        wall, end = overlapped_backward(1.0, [0.5, 1.0], [0.3, 0.2])
        self.assertAlmostEqual(wall, 1.0)
        self.assertAlmostEqual(end, 1.2)

    def test_a_slow_bucket_delays_the_next(self):
        # bucket 0: 0.5 + 0.6 = 1.1; bucket 1 starts at 1.1 (after backward's 1.0): ends 1.3
        self.assertAlmostEqual(overlapped_backward(1.0, [0.5, 1.0], [0.6, 0.2])[1], 1.3)

    def test_hidden_entirely(self):
        self.assertAlmostEqual(overlapped_backward(1.0, [0.1, 0.2], [0.1, 0.1])[1], 0.3)

    def test_backward_slows_while_a_bucket_is_in_flight_on_its_core(self):
        # half speed from 0.5 s to 0.7 s (bucket 0): 0.1 s of work lost, backward ends at 1.1;
        # bucket 1 (ready at the end) 1.1-1.3
        wall, end = overlapped_backward(1.0, [0.5, 1.0], [0.2, 0.2], 0.5)
        self.assertAlmostEqual(wall, 1.1)
        self.assertAlmostEqual(end, 1.3)

    def test_both_slow_when_they_share_the_core(self):
        # bucket 0 from 0.5 s at half speed: 0.4 s; backward meanwhile 0.2 of work, then 0.3 at full speed
        # (ends 1.2); bucket 1 1.2-1.4 at full speed
        wall, end = overlapped_backward(1.0, [0.5, 1.0], [0.2, 0.2], 0.5, 0.5)
        self.assertAlmostEqual(wall, 1.2)
        self.assertAlmostEqual(end, 1.4)

    def test_a_bucket_in_flight_while_the_next_becomes_ready(self):
        # bucket 0 from 0.5 s at half speed (0.8 s of wall time); bucket 1 ready at 0.7 s waits; bucket 0
        # ends at 1.3 s (backward at 0.9 of its work), bucket 1 1.3-1.5 (backward ends with it), bucket 2 1.5-1.6
        wall, end = overlapped_backward(1.0, [0.5, 0.6, 1.0], [0.4, 0.1, 0.1], 0.5, 0.5)
        self.assertAlmostEqual(wall, 1.5)
        self.assertAlmostEqual(end, 1.6)

    def test_a_bucket_in_flight_to_the_end_of_backward(self):
        # bucket 0 0.5-1.5 s; the other half of backward at half speed also ends at 1.5; bucket 1 1.5-1.7
        wall, end = overlapped_backward(1.0, [0.5, 1.0], [1.0, 0.2], 0.5)
        self.assertAlmostEqual(wall, 1.5)
        self.assertAlmostEqual(end, 1.7)


class Step(unittest.TestCase):
    def test_two_nodes_one_bucket_after_backward(self):
        # compute 1 s (backward half of it), data 10 ms; 100 MB at 10 GB/s over 2 ranks: 10 ms
        n = node({32: (1.0, 0.01)}, share=0.5, floats=(25_000_000,), ready=(1.0,))
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        p = predict_step(n, net, 2, 32)
        self.assertAlmostEqual(p["exposed_s"], 0.01, places=12)
        self.assertAlmostEqual(p["step_s"], 1.02, places=12)
        self.assertAlmostEqual(p["images_per_second"], 64 / 1.02, places=9)

    def test_without_overlap_every_bucket_waits_for_backward(self):
        # two 100 MB buckets ready at 0.2 and 1.0 of backward, but reduced after it: 2 x 10 ms exposed
        n = node({32: (1.0, 0.0)}, share=0.5, floats=(25_000_000, 25_000_000), ready=(0.2, 1.0), overlap=False)
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        self.assertAlmostEqual(predict_step(n, net, 2, 32)["exposed_s"], 0.02, places=12)

    def test_a_communication_thread_without_its_own_core_slows_backward(self):
        # 1 thread on 1 core: backward (0.5 s) at half speed while bucket 0 (10 ms, ready at 0.2) is in flight
        n = node({32: (1.0, 0.0)}, share=0.5, floats=(25_000_000, 25_000_000), ready=(0.2, 1.0), rank_cores=1)
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        p = predict_step(n, net, 2, 32)
        self.assertAlmostEqual(p["compute_s"], 1.005, places=12)
        self.assertAlmostEqual(p["exposed_s"], 0.01, places=12)

    def test_each_step_waits_for_the_slowest_rank(self):
        # as the first case, compute spread 10 %: + 0.1 x 1 s x E[max of 2 normals] = 0.1 / sqrt(pi)
        n = node({32: (1.0, 0.01)}, share=0.5, floats=(25_000_000,), ready=(1.0,), spread=0.1)
        net = {"name": "t", "latency_us": 0.0, "bandwidth_GBps": 10.0}
        p = predict_step(n, net, 2, 32)
        self.assertAlmostEqual(p["straggler_s"], 0.1 / math.sqrt(math.pi), places=9)
        self.assertAlmostEqual(p["exposed_s"], 0.01 + 0.1 / math.sqrt(math.pi), places=9)
        self.assertAlmostEqual(p["step_s"], 1.02 + 0.1 / math.sqrt(math.pi), places=9)
        self.assertEqual(predict_step(n, net, 1, 32)["straggler_s"], 0.0)  # one rank waits for no one

    def test_compute_between_two_measured_batches_is_interpolated(self):
        n = node({16: (0.4, 0.0), 32: (1.0, 0.02)})
        at = n.at(24)
        self.assertAlmostEqual(at["compute_s"], 0.7)
        self.assertAlmostEqual(at["data_wait_s"], 0.01)

    def test_compute_outside_the_measured_batches_is_refused(self):
        n = node({16: (0.4, 0.0), 32: (1.0, 0.0)})
        for b in (8, 64):
            with self.assertRaises(ScalingError):
                n.at(b)


class Rcp(unittest.TestCase):
    rcp = load_rcp()

    def test_a_reference_batch(self):
        e = epochs_at(self.rcp, 3264)
        self.assertAlmostEqual(e["mean"], 35.2, places=9)
        self.assertEqual((e["min"], e["max"]), (34, 37))

    def test_interpolated_between_two_batches(self):
        # 50,000 lies 848 / 9,728 of the way from 49,152 (68.0, 67-69) to 58,880 (79.9, 78-81)
        e = epochs_at(self.rcp, 50000)
        w = 848 / 9728
        self.assertAlmostEqual(e["mean"], 68.0 + w * 11.9, places=9)
        self.assertAlmostEqual(e["min"], 67 + w * 11, places=9)
        self.assertAlmostEqual(e["max"], 69 + w * 12, places=9)

    def test_beyond_the_largest_batch_is_out_of_range(self):
        self.assertIsNotNone(epochs_at(self.rcp, 67840))
        self.assertIsNone(epochs_at(self.rcp, 67841))

    def test_below_the_smallest_batch_takes_its_epochs_and_says_so(self):
        e = epochs_at(self.rcp, 256)
        self.assertAlmostEqual(e["mean"], 35.0)
        self.assertIn("below range", e["how"])


class TimeToSolution(unittest.TestCase):
    def setUp(self):
        # epochs 10 up to global batch 8, 20 at 16: the optimum comes from the RCP's growth and the
        # latency term 2 log2(N) x 0.1 s of the one 1 kB bucket
        self.tmp = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
        self.tmp.write("global_batch,runs,epochs_each\n1,1,10\n8,1,10\n16,1,20\n")
        self.tmp.close()
        self.rcp = load_rcp(self.tmp.name)
        self.node = node({1: (1.0, 0.0)}, share=1.0, floats=(250,), ready=(1.0,), act=1e9, params=0)
        self.net = {"name": "t", "latency_us": 1e5, "bandwidth_GBps": 1e9}

    def tearDown(self):
        os.unlink(self.tmp.name)

    def test_the_minimum_and_the_out_of_range_point(self):
        rows = project(self.node, self.net, self.rcp, [1, 2, 4, 8, 16, 32], local_batch=1, train_images=100,
                       val_images=0, eval_every=1)
        tts = {r["nodes"]: r.get("time_to_solution_s") for r in rows}
        # 100 images x epochs x (1 + 0.2 log2 N) / N
        for n, want in ((1, 1000), (2, 600), (4, 350), (8, 200), (16, 225)):
            self.assertAlmostEqual(tts[n], want, delta=1e-6 * want)
        self.assertIsNone(tts[32])
        self.assertIn("out of range", next(r for r in rows if r["nodes"] == 32)["refused"])
        self.assertEqual([r["nodes"] for r in rows if r["best"]], [8])

    def test_a_run_trains_to_the_next_evaluation(self):
        # evaluations after 4, 8, 12 (--eval-offset -1): a target after 10 epochs is seen after 12
        self.assertEqual(stopping_epoch(10, 4, -1), 12)
        self.assertEqual(stopping_epoch(8, 4, -1), 8)
        point = {"nodes": 2, "images_per_second": 50.0}
        # 12 epochs of 100 images at 50/s = 24 s; 3 evaluations of 50 images x 0.1 s over 2 nodes = 2.5 s each
        seconds, evaluations = time_to_solution(point, 12, 100, 50, 4, 0.1)
        self.assertEqual(evaluations, 3)
        self.assertAlmostEqual(seconds, 24 + 3 * 2.5)

    def test_the_evaluation_offset_of_the_recipe(self):
        # --eval-offset 2 --eval-every 4: evaluations after 3, 7, ..., 35, 39
        self.assertEqual(stopping_epoch(35.2, 4, 2), 39)
        self.assertEqual(stopping_epoch(35.0, 4, 2), 35)
        self.assertEqual(stopping_epoch(34.0, 4, 2), 35)
        self.assertEqual(stopping_epoch(1.0, 4, 2), 3)
        seconds, evaluations = time_to_solution({"nodes": 1, "images_per_second": 100.0}, 35, 100, 10, 4, 1.0,
                                                eval_offset=2)
        self.assertEqual(evaluations, 9)  # 3, 7, ..., 35
        self.assertAlmostEqual(seconds, 35 + 9 * 10)

    def test_each_reference_run_stops_at_the_next_evaluation(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("global_batch,runs,epochs_each\n1,4,34 35 36 40\n")
        try:
            rcp = load_rcp(f.name)
            rows = project(self.node, self.net, rcp, [1], local_batch=1, train_images=100, val_images=0,
                           eval_every=4, eval_offset=2)
        finally:
            os.unlink(f.name)
        # runs of 34, 35, 36, 40 epochs stop after 35, 35, 39, 43: mean 38, band 35-43
        r = rows[0]
        self.assertEqual((r["trained_epochs_mean"], r["trained_epochs_min"], r["trained_epochs_max"]), (38, 35, 43))
        self.assertAlmostEqual(r["time_to_solution_s"], 3800)  # 38 epochs of 100 images at 1 image/s

    def test_a_batch_that_does_not_fit_is_refused(self):
        rows = project(self.node, self.net, self.rcp, [1, 2], local_batch=1, node_memory_gb=0.5)
        self.assertTrue(all("does not fit" in r["refused"] for r in rows))
        self.assertFalse(any(r["best"] for r in rows))


class Calibration(unittest.TestCase):
    def test_the_fit_recovers_latency_and_bandwidth(self):
        for p, alg in ((2, "rabenseifner"), (4, "ring"), (8, "rabenseifner")):
            points = [(n, allreduce_seconds(n, p, 50e-6, 2e9, alg)) for n in (0.25e6, 1e6, 4e6, 16e6)]
            alpha, beta = fit(points, p, alg)
            self.assertAlmostEqual(alpha, 50e-6, delta=1e-9)
            self.assertAlmostEqual(beta, 2e9, delta=1.0)

    def test_the_benchmark_output_is_read_per_algorithm_and_size(self):
        text = ("=== ring 0.25\n2 ranks, ...\nsynchronous  0.25  0.0  1.5  1.5  0.0  0%\n"
                "overlap  0.25  0.0  9.0  9.0  0.0  0%\n=== ring 1.0\nsynchronous  1  0.0  4.0  4.0  0.0  0%\n")
        self.assertEqual(parse(text), {"ring": [(0.25e6, 1.5e-3), (1e6, 4e-3)]})

    def test_a_size_run_several_times_counts_its_fastest_run(self):
        run = "=== ring {mb}\nsynchronous  {mb}  0.0  {ms}  {ms}  0.0  0%\noverlap  {mb}  0.0  9.0  9.0  0.0  0%\n"
        text = "".join(run.format(mb=mb, ms=ms) for mb, ms in
                       ((0.25, 1.5), (1.0, 4.0), (0.25, 2.9), (1.0, 3.6), (0.25, 1.7), (1.0, 4.4)))
        self.assertEqual(parse(text), {"ring": [(0.25e6, 1.5 * 1e-3), (1e6, 3.6 * 1e-3)]})

    def test_the_script_runs_every_algorithm_and_size_in_turn(self):
        script = bench_script("bench", 2, 3, "sbatch", [0.1, 1.0], runs=2)
        marks = [line for line in script.splitlines() if line.startswith("echo '===")]
        one = [f"echo '=== {a} {mb}'" for a in ("default", "ring", "rabenseifner") for mb in (0.1, 1.0)]
        self.assertEqual(marks, one + one)

    def test_the_shared_core_speed_is_the_median_of_its_runs(self):
        run = "=== shared {i}\nsynchronous  0.2  100.0  {sync}  0.0  0.0  0%\noverlap  0.2  100.0  100.0  50.0  50.0  50%\n"
        text = "".join(run.format(i=i + 1, sync=s) for i, s in enumerate((62.0, 90.0, 83.0)))
        speed, speeds = shared_core_speeds(text)
        self.assertEqual(speeds, [0.62, 0.9, 0.83])
        self.assertAlmostEqual(speed, 0.83)
        with self.assertRaises(ScalingError):
            shared_core_speeds(run.format(i=1, sync=62.0))  # one run of the three


class Trace(unittest.TestCase):
    def test_bucket_ready_times_as_fractions_of_backward(self):
        events = []
        for step, t0 in enumerate((0, 1000, 2000, 3000)):  # us; the first step is a warm-up
            evaluation = 500 if step == 3 else 0  # the last step also holds the final evaluation's forward
            events += [{"name": "data wait", "cat": "data", "ph": "B", "ts": t0, "tid": 0},
                       {"name": "data wait", "cat": "data", "ph": "E", "ts": t0 + 10, "tid": 0},
                       {"name": "conv", "cat": "forward", "ph": "B", "ts": t0 + 10, "tid": 0},
                       {"name": "conv", "cat": "forward", "ph": "E", "ts": t0 + 110, "tid": 0},
                       {"name": "conv", "cat": "backward", "ph": "B", "ts": t0 + 200, "tid": 0},
                       {"name": "conv", "cat": "forward", "ph": "X", "ts": t0 + 650, "dur": evaluation, "tid": 0},
                       {"name": "bucket ready", "cat": "comm", "ph": "i", "ts": t0 + 300, "tid": 1},
                       {"name": "bucket ready", "cat": "comm", "ph": "i", "ts": t0 + 600, "tid": 1},
                       {"name": "conv", "cat": "backward", "ph": "E", "ts": t0 + 600, "tid": 0}]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"traceEvents": events}, f)
        try:
            t = trace_profile(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(t["steps"], 3)
        self.assertAlmostEqual(t["forward_ms"], 0.1)  # the median: not pulled by the evaluation
        self.assertAlmostEqual(t["backward_ms"], 0.4)
        self.assertEqual(t["ready_fractions"], [0.25, 1.0])


    @staticmethod
    def write_steps(path, computes_us):
        """A trace of steps whose forward + backward take computes_us (forward 1/4 of it)."""
        events, t0 = [], 0
        for c in computes_us:
            events += [{"name": "data wait", "cat": "data", "ph": "X", "ts": t0, "dur": 5, "tid": 0},
                       {"name": "conv", "cat": "forward", "ph": "X", "ts": t0 + 10, "dur": c / 4, "tid": 0},
                       {"name": "conv", "cat": "backward", "ph": "X", "ts": t0 + 10 + c / 4, "dur": 3 * c / 4, "tid": 0}]
            t0 += 10 + c + 100
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)

    def profile_of_steps(self, computes_us):
        with tempfile.TemporaryDirectory() as d:
            self.write_steps(os.path.join(d, "trace.json"), computes_us)
            return trace_profile(os.path.join(d, "trace.json"))

    def test_compute_spread_is_the_interquartile_range_over_the_median(self):
        # warm-up 5000 us, then 1000, 1010, ..., 1090 us, then a last step holding an evaluation:
        # exclusive quartiles of ten values at ranks 2.75 and 8.25: 1017.5 and 1072.5; median 1045
        middle = [1000 + 10 * i for i in (3, 0, 9, 1, 8, 2, 7, 4, 6, 5)]
        t = self.profile_of_steps([5000] + middle + [9000])
        self.assertAlmostEqual(t["compute_spread"], 55 / 1.349 / 1045, places=9)

    def test_too_few_steps_give_no_spread(self):
        t = self.profile_of_steps([5000] + [1000 + 10 * i for i in range(7)] + [9000])
        self.assertIsNone(t["compute_spread"])
        self.assertEqual(t["steps"], 8)

    def test_node_trace_gives_the_node_its_spread_or_is_refused_naming_the_file(self):
        n = node({32: (1.0, 0.0)})
        with tempfile.TemporaryDirectory() as d:
            good, short = os.path.join(d, "good.json"), os.path.join(d, "short.json")
            self.write_steps(good, [5000] + [1000 + 10 * i for i in (3, 0, 9, 1, 8, 2, 7, 4, 6, 5)] + [9000])
            self.write_steps(short, [5000] + [1000] * 7 + [9000])
            for bad in (short, os.path.join(d, "missing.json")):
                with self.assertRaisesRegex(ScalingError, os.path.basename(bad)):
                    n.take_spread_from(bad)
            self.assertEqual(n.compute_spread, 0.0)
            n.take_spread_from(good)
        self.assertAlmostEqual(n.compute_spread, 55 / 1.349 / 1045, places=9)
        self.assertIn("--node-trace", n.sources["compute spread"])


class IdleNodeFillers(unittest.TestCase):
    def args(self, fill=True):
        return argparse.Namespace(nodes="1,2,4", mode="weak", batch_size=32, ranks_per_node=2, threads=3,
                                  job="j.ini", data="d", epochs=None, steps=10, extra=[], fill_idle_nodes=fill)

    def test_each_idle_node_runs_a_longer_one_node_copy(self):
        args = self.args()
        points = plan_points(args)
        one = filler_points(args, points[0], 4, "nodes-1-rep1")
        self.assertEqual([f["name"] for f in one], ["nodes-1-rep1-filler1", "nodes-1-rep1-filler2",
                                                     "nodes-1-rep1-filler3"])
        self.assertTrue(all(f["nodes"] == 1 and f["ranks"] == 2 and f["local_batch"] == 32 for f in one))
        a = one[0]["args"]
        self.assertEqual(a[a.index("--max-steps") + 1], "12")  # two steps longer than the point's 10
        self.assertEqual(len(filler_points(args, points[1], 4, "nodes-2")), 2)
        self.assertEqual(filler_points(args, points[2], 4, "nodes-4"), [])

    def test_none_without_the_option(self):
        args = self.args(fill=False)
        self.assertEqual(filler_points(args, plan_points(args)[0], 4, "nodes-1"), [])


if __name__ == "__main__":
    unittest.main()
