#!/usr/bin/env bash
# nostrum-bench --bf16-handover, --bf16-block-outputs and --bf16-conv-outputs: "on" reports the
# convs that take their output gradient and their input activations in bf16 (every conv on
# nostrum's bf16 GEMM), the blocks and the convs whose output is kept in bf16, "off" turns each
# off, and "ab" alternates one switch in one process and reports both speeds (the off speed last on
# the line). A CPU without AVX512_BF16 reports itself skipped (77).
# Usage: THIS path/to/nostrum-bench
set -euo pipefail
bench=$1
grep -qw avx512_bf16 /proc/cpuinfo || { echo "SKIP: the CPU lacks AVX512_BF16"; exit 77; }
step() {
  "$bench" --model resnet8 --image 8x8x1 --batch 4 --classes 10 --threads 1 --steps 2 --warmup 1 \
    --precision bf16 --conv-kernel gemm_bf16 "$@" 2>&1
}
fail=0
expect() {  # OUTPUT PATTERN WHAT
  if grep -Eq -- "$2" <<<"$1"; then echo "ok: $3"; else echo "FAIL: $3"; fail=1; fi
}
out=$(step --bf16-handover on)
printf '%s\n' "$out"
# resnet8: the stem conv, two per basic block (3 blocks), two downsample convs. The inputs: each
# block's second conv (3), block 1's first conv, which reads the stem's bf16 output, and the first
# and downsample convs of blocks 2 and 3, which read the bf16 output of the block before (5).
expect "$out" '"bf16_handover_convs": 9, "bf16_input_convs": 8, "bf16_block_outputs": 3[,}]' \
  "on: every conv of resnet8 takes a bf16 gradient, 8 their input, 3 block outputs in bf16"
if grep -q '_off"' <<<"$out"; then
  echo "FAIL: on reports an off speed"
  fail=1
fi
out=$(step --bf16-handover off)
printf '%s\n' "$out"
expect "$out" '"bf16_handover_convs": 0, "bf16_input_convs": 5, "bf16_block_outputs": 3[,}]' \
  "handover off: only the convs reading a bf16 block output"
# The measurement runs with the switches as given: no bf16 operands with everything off.
out=$(step --bf16-handover off --bf16-block-outputs off --bf16-conv-outputs off \
  --conv-kernel measure --conv-cache none --verbose)
if grep -q 'bf16 operands:' <<<"$out"; then
  echo "FAIL: off measured on bf16 operands"
  fail=1
else
  echo "ok: off measures on fp32 operands"
fi
out=$(step --bf16-block-outputs off)
printf '%s\n' "$out"
expect "$out" '"bf16_handover_convs": 9, "bf16_input_convs": 3, "bf16_block_outputs": 0[,}]' \
  "block outputs off: the hand-over alone"
out=$(step --bf16-handover ab)
printf '%s\n' "$out"
expect "$out" '"bf16_conv_outputs": 0, .*"images_per_second_handover_off": [0-9]+\.[0-9]+\}' \
  "handover ab: both speeds"
out=$(step --bf16-block-outputs ab)
printf '%s\n' "$out"
expect "$out" '"bf16_conv_outputs": 0, .*"images_per_second_block_outputs_off": [0-9]+\.[0-9]+\}' \
  "block outputs ab: both speeds"
# oneDNN's bf16 forward writes bf16: every conv's output kept so (nostrum's bf16 GEMM writes fp32).
out=$(step --conv-kernel onednn_bf16)
printf '%s\n' "$out"
expect "$out" '"bf16_block_outputs": 3, "bf16_conv_outputs": 9[,}]' "onednn_bf16: 9 conv outputs"
out=$(step --conv-kernel onednn_bf16 --bf16-conv-outputs off)
printf '%s\n' "$out"
expect "$out" '"bf16_conv_outputs": 0[,}]' "conv outputs off: none"
out=$(step --conv-kernel onednn_bf16 --bf16-conv-outputs ab)
printf '%s\n' "$out"
expect "$out" '"bf16_conv_outputs": 9, .*"images_per_second_conv_outputs_off": [0-9]+\.[0-9]+\}' \
  "conv outputs ab: both speeds"
exit $fail
