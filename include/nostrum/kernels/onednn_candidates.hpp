// oneDNN's convolution primitives as candidates of the measured choice
// (kernels/conv_candidate.hpp): "onednn" (fp32) and "onednn_bf16" (bf16 operands, fp32 results),
// every pass, every geometry.
#pragma once

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// fp32 everywhere oneDNN runs (it dispatches to the CPU's best ISA within DNNL_MAX_CPU_ISA).
const ConvCandidate& onednn_fp32_candidate();
// bf16 where the table has AVX512_BF16 and oneDNN dispatches to avx512_core_bf16 or
// avx512_core_amx (its AMX tiles where the CPU has them and Linux granted the permission).
const ConvCandidate& onednn_bf16_candidate();

}  // namespace nostrum::kernels
