"""compare.py's statistics (tools/bench/compare_rounds.py) on planted runs: the selection round
keeps PyTorch's fastest configuration (the first of equals), the compared rounds give each side's
best over the same number of runs and refuse unequal counts or a PyTorch run in another
configuration, their medians' ratio leaves the selection round out and a stalled run aside, and
the all-runs best counts the selection round; compare.py's cell of those figures."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))

from compare_rounds import (best_of_all, chosen_config, compared_best,  # noqa: E402
                            compared_median_ratio, fastest)


def run(rate, rnd, config=None):
    r = {"images_per_second": rate, "round": rnd}
    if config is not None:
        r["config"] = config
    return r


class SelectionTest(unittest.TestCase):
    def test_fastest_configuration_is_kept(self):
        selection = [run(70.0, 0, ("nchw", False)), run(79.0, 0, ("channels_last", True)),
                     run(75.0, 0, ("channels_last", False)), run(71.0, 0, ("nchw", True))]
        self.assertEqual(chosen_config(selection), ("channels_last", True))

    def test_ties_keep_the_first(self):
        selection = [run(70.0, 0, ("nchw", False)), run(80.0, 0, ("channels_last", False)),
                     run(80.0, 0, ("channels_last", True))]
        self.assertEqual(chosen_config(selection), ("channels_last", False))

    def test_no_runs_refused(self):
        with self.assertRaises(ValueError):
            fastest([])


class ComparedRoundsTest(unittest.TestCase):
    def setUp(self):
        cl = ("channels_last", True)
        # PyTorch's selection round holds its fastest draw (90): the compared rounds leave it out.
        self.theirs = [run(60.0, 0, ("nchw", False)), run(90.0, 0, cl), run(80.0, 1, cl),
                       run(84.0, 2, cl)]
        self.ours = [run(70.0, 0), run(88.0, 1), run(86.0, 2)]

    def test_best_of_the_compared_rounds(self):
        o, t = compared_best(self.ours, self.theirs)
        self.assertEqual(o["images_per_second"], 88.0)
        self.assertEqual(t["images_per_second"], 84.0)

    def test_best_of_all_counts_the_selection_round(self):
        o, t = best_of_all(self.ours, self.theirs)
        self.assertEqual(o["images_per_second"], 88.0)
        self.assertEqual(t["images_per_second"], 90.0)

    def test_median_ratio_of_the_compared_rounds(self):
        # Three compared rounds; nostrum's second stalled (40): the medians are 86 and 80.
        cl = ("channels_last", True)
        theirs = self.theirs + [run(78.0, 3, cl)]
        ours = [run(70.0, 0), run(88.0, 1), run(40.0, 2), run(86.0, 3)]
        self.assertAlmostEqual(compared_median_ratio(ours, theirs), 86.0 / 80.0)

    def test_median_ratio_refuses_unequal_counts(self):
        with self.assertRaises(ValueError):
            compared_median_ratio(self.ours[:2], self.theirs)

    def test_unequal_counts_refused(self):
        with self.assertRaisesRegex(ValueError, "nostrum 2, PyTorch 3"):
            compared_best(self.ours, self.theirs + [run(85.0, 3, ("channels_last", True))])

    def test_no_compared_round_refused(self):
        with self.assertRaises(ValueError):
            compared_best([run(70.0, 0)], [run(60.0, 0, ("nchw", False))])

    def test_another_configuration_refused(self):
        theirs = self.theirs[:3] + [run(84.0, 2, ("nchw", False))]
        with self.assertRaisesRegex(ValueError, "selected configuration"):
            compared_best(self.ours, theirs)


class AllRunsTextTest(unittest.TestCase):
    """compare.py's table cell beside the ratio: the compared rounds' median ratio, then each
    side's best over all its runs, with each side's own run count."""

    def test_cell(self):
        import compare  # noqa: E402 (tools/bench, on the path above)
        cl, nchw = ("channels_last", True), ("nchw", False)
        ours = [run(70.0, 0), run(90.0, 1), run(80.0, 2)]
        theirs = [run(75.0, 0, nchw), run(100.0, 0, cl), run(80.0, 1, cl), run(60.0, 2, cl)]
        best_ours, best_theirs, every = compare.summarise(ours, theirs)
        self.assertEqual((best_ours["images_per_second"], best_theirs["images_per_second"]),
                         (90.0, 80.0))
        self.assertIs(best_ours["measured_by"], ours[0])
        # medians 85 / 70; all runs 90 / 100; 3 runs of nostrum, 4 of PyTorch
        self.assertEqual(compare.all_runs_text(every), "1.21 / 0.90 (of 3 / 4 runs)")


if __name__ == "__main__":
    unittest.main()
