// oneDNN's convolution primitives as candidates of the measured choice
// (kernels/conv_candidate.hpp): "onednn" (fp32) and "onednn_bf16" (bf16 operands, fp32 results),
// every pass, every geometry.
#pragma once

#include <cstddef>
#include <memory>

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// bf16: the most bytes of bf16 operand copies (the input and/or output gradient, rounded from
// fp32) one oneDNN call makes; a pass needing more runs in chunks of whole images. At ResNet-50
// 224 batch 32 the largest (layer2.0.conv1's weight gradient) would take 77 MB, twice the 38 MB an
// fp32 run's shared conv scratch needs; chunked, every oneDNN bf16 workspace there stays below it.
inline constexpr size_t kOnednnBf16CopyBudgetBytes = size_t(16) << 20;

// fp32 everywhere oneDNN runs (it dispatches to the CPU's best ISA within DNNL_MAX_CPU_ISA).
const ConvCandidate& onednn_fp32_candidate();
// bf16 where the table has AVX512_BF16 and oneDNN dispatches to avx512_core_bf16 or
// avx512_core_amx (its AMX tiles where the CPU has them and Linux granted the permission).
const ConvCandidate& onednn_bf16_candidate();

// The candidates' prepared kernel with another copy budget (the tests' way to reach the chunked
// path on small shapes); *chunks (if given) receives the prepared batch's number of chunks.
std::unique_ptr<PreparedConv> prepare_onednn(const ConvGeometry& g, ConvPass pass,
                                             Precision precision, size_t copy_budget_bytes,
                                             int* chunks = nullptr);
// How many convolution primitives the last run() of a kernel from prepare_onednn executed: its
// chunks, or 1 where the call gave its bf16 operands (no copies: the whole batch at once).
int onednn_last_run_primitives(const PreparedConv& prepared);

}  // namespace nostrum::kernels
