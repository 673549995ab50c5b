"""conv_remeasure.py's reading of nostrum-bench's --verbose table (tools/bench/conv_remeasure.py)
on planted rows: times, floors (`>X ms`, not run), candidates cut short (`*`), the operand
brackets that are part of a row's identity, the host state's round trips where the row has them;
when four round trips count as one host state; several measurements pooled into one (each
candidate's median, a floor where one did not run it), and the first table's choices judged
against a later one."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))

from conv_remeasure import compare, describe_trips, ms_text, one_host_state, parse_table, pool_tables  # noqa: E402

SHAPE = "N32 H56 W56 C64 K256 R1 S1 /1 p0"
ROWS = "\n".join([
    "nostrum-bench: measured 3 conv passes in 1.2 s",
    f"nostrum-bench: {SHAPE} forward: direct_avx512 >6.238 ms gemm_bf16 7.228 ms* "
    "gemm_bf16_per_thread 4.727 ms onednn_bf16 3.990 ms -> onednn_bf16 (measured) "
    "[bf16 operands: in d_out out] [round trip 505 498 ns]",
    f"nostrum-bench: {SHAPE} backward_data: gemm_bf16 5.1 ms onednn_bf16 4.2 ms -> onednn_bf16 "
    "(measured) [bf16 operands: in d_out] [d_in +=] [round trip 85 97 ns]",
    f"nostrum-bench: {SHAPE} backward_data: gemm_bf16 5.3 ms onednn_bf16 4.4 ms -> onednn_bf16 "
    "(cached) [bf16 operands: in d_out]",
])


class ParseTableTest(unittest.TestCase):
    def test_rows_times_floors_cut_and_round_trips(self):
        table = parse_table(ROWS)
        self.assertEqual(len(table), 3)
        chosen, times, floors, cut, trips = table[(SHAPE, "forward [bf16 operands: in d_out out]")]
        self.assertEqual(chosen, "onednn_bf16")
        self.assertEqual(times, {"gemm_bf16": 7.228, "gemm_bf16_per_thread": 4.727,
                                 "onednn_bf16": 3.990})
        self.assertEqual(floors, {"direct_avx512": 6.238})
        self.assertEqual(cut, {"gemm_bf16"})
        self.assertEqual(trips, (505.0, 498.0))

    def test_operand_brackets_tell_rows_apart(self):
        table = parse_table(ROWS)
        self.assertEqual(table[(SHAPE, "backward_data [bf16 operands: in d_out] [d_in +=]")][4],
                         (85.0, 97.0))
        self.assertIsNone(table[(SHAPE, "backward_data [bf16 operands: in d_out]")][4])

    def test_other_lines_are_not_rows(self):
        self.assertEqual(parse_table("nostrum-bench: measured 3 conv passes in 1.2 s\n{}"), {})


class HostStateTest(unittest.TestCase):
    def test_one_state_within_twice(self):
        self.assertTrue(one_host_state((85.0, 97.0, 120.0, 170.0)))
        self.assertTrue(one_host_state((450.0, 600.0)))
        self.assertFalse(one_host_state((85.0, 97.0, 450.0, 460.0)))
        self.assertTrue(one_host_state(()))  # not probed
        self.assertTrue(one_host_state((0.0, 90.0)))  # 0: no pool to probe

    def test_describe(self):
        self.assertEqual(describe_trips(None), "-")
        self.assertEqual(describe_trips((85.0, 97.4)), "85/97")


def row(times, floors=None, cut=(), trips=None):
    return (min(times, key=times.get), dict(times), dict(floors or {}), set(cut), trips)


class PoolTest(unittest.TestCase):
    KEY = (SHAPE, "forward")

    def test_one_table_is_itself(self):
        table = {self.KEY: row({"a": 1.0, "b": 2.0})}
        self.assertIs(pool_tables([table]), table)

    def test_median_per_candidate_and_choice(self):
        tables = [{self.KEY: row({"a": 1.00, "b": 1.10}, trips=(90.0, 95.0))},
                  {self.KEY: row({"a": 1.30, "b": 0.95}, trips=(450.0, 460.0))},
                  {self.KEY: row({"a": 1.02, "b": 1.08}, cut={"b"})}]
        chosen, times, floors, cut, trips = pool_tables(tables)[self.KEY]
        self.assertEqual(times, {"a": 1.02, "b": 1.08})  # one noisy reading each does not decide
        self.assertEqual(chosen, "a")
        self.assertEqual(floors, {})
        self.assertEqual(cut, {"b"})
        self.assertEqual(trips, (90.0, 460.0))  # both states seen: not one host state

    def test_a_floor_counts_as_its_bound(self):
        tables = [{self.KEY: row({"a": 1.0}, floors={"c": 3.0})},
                  {self.KEY: row({"a": 1.2, "c": 4.0})},
                  {self.KEY: row({"a": 1.1}, floors={"c": 2.5})}]
        self.assertEqual(pool_tables(tables)[self.KEY][1], {"a": 1.1, "c": 3.0})

    def test_a_candidate_not_run_everywhere_is_not_chosen(self):
        # As nostrum's pool_conv_tables: c's pooled time is the fastest only through a floor, a
        # bound below its time; one measurement showed it cannot win.
        tables = [{self.KEY: row({"a": 2.0}, floors={"c": 1.5})},
                  {self.KEY: row({"a": 2.2, "c": 1.0})},
                  {self.KEY: row({"a": 2.1, "c": 1.2})}]
        chosen, times = pool_tables(tables)[self.KEY][:2]
        self.assertEqual(times, {"a": 2.1, "c": 1.2})
        self.assertEqual(chosen, "a")

    def test_different_passes_refused(self):
        with self.assertRaises(SystemExit):
            pool_tables([{self.KEY: row({"a": 1.0})}, {(SHAPE, "backward_data"): row({"a": 1.0})}])


class CompareTest(unittest.TestCase):
    def test_within_and_miss(self):
        first = {(SHAPE, "forward"): row({"a": 1.00, "b": 1.04}),
                 (SHAPE, "backward_data"): row({"a": 2.00, "b": 2.30}, trips=(90.0, 95.0))}
        later = {(SHAPE, "forward"): row({"a": 1.04, "b": 1.00}),  # 4 % behind: within
                 (SHAPE, "backward_data"): row({"a": 2.20, "b": 2.00}, trips=(92.0, 99.0))}
        c = compare(first, later, 0.05)
        self.assertEqual(c["within"], 1)
        self.assertEqual(c["changed"], 2)
        self.assertAlmostEqual(c["worst"], 0.10)
        self.assertAlmostEqual(c["chosen_ms"], 3.24)
        self.assertAlmostEqual(c["fastest_ms"], 3.00)
        self.assertEqual((c["one_state"], c["one_state_within"]), (2, 1))
        self.assertEqual(len(c["misses"]), 1)
        self.assertIn("backward_data: a 2.200 ms, fastest b 2.000 ms (+10.0 %)", c["misses"][0])

    def test_times_as_the_table_prints_them(self):
        self.assertEqual(ms_text(0.0034567), "0.003457")
        self.assertEqual(ms_text(0.25), "0.2500")
        self.assertEqual(ms_text(12.3456), "12.346")
        self.assertEqual(ms_text(0.0), "0.000")
        first = {(SHAPE, "forward"): row({"a": 0.004, "b": 0.0045})}
        later = {(SHAPE, "forward"): row({"a": 0.0045, "b": 0.0040})}
        self.assertIn("a 0.004500 ms, fastest b 0.004000 ms (+12.5 %)",
                      compare(first, later, 0.05)["misses"][0])

    def test_a_choice_not_run_again_misses_by_its_floor(self):
        first = {(SHAPE, "forward"): row({"a": 1.0, "b": 1.1})}
        later = {(SHAPE, "forward"): row({"b": 1.0}, floors={"a": 1.3})}
        c = compare(first, later, 0.05)
        self.assertEqual(c["within"], 0)
        self.assertIn("(not run: its floor)", c["misses"][0])


if __name__ == "__main__":
    unittest.main()
