"""conv_remeasure.py's reading of nostrum-bench's --verbose table (tools/bench/conv_remeasure.py)
on planted rows: times, floors (`>X ms`, not run), candidates cut short (`*`), the operand
brackets that are part of a row's identity, the host state's round trips where the row has them;
and when four round trips count as one host state."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench"))

from conv_remeasure import describe_trips, one_host_state, parse_table  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
