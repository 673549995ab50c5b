// Winograd F(2x2, 3x3) convolution on nostrum's bf16 GEMM (kernels/conv_candidate.hpp's
// "winograd_bf16"): a 3x3 stride-1 pad-1 convolution as 16 GEMMs of transformed 4x4 input tiles
// against transformed filters, 16 products per 2x2 output tile and input channel where the direct
// convolution has 36 (2.25x fewer), the transforms fused with the GEMMs a block of tiles at a
// time so that they stay in the core's cache. Forward and backward-data (the same convolution of
// the output gradient with the filter turned by 180 degrees), and the weight gradient (the 16
// positions' products summed over all tiles: 16 GEMMs over each chunk of the batch's transformed
// tiles, the chunks in order).
#pragma once

#include <cstdint>
#include <memory>

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// Whether the Winograd candidate runs this pass: 3x3, stride 1, pad 1, the pass's input channels
// (C forward and backward-weights, K backward-data) a multiple of 32 and its output channels a
// multiple of 16 (backward-weights: 32).
bool winograd_fits(const ConvGeometry& g, ConvPass pass);

// bf16 operands (vdpbf16ps, fp32 sums; AVX512_BF16).
const ConvCandidate& winograd_bf16_candidate();

// The weight gradient's budget for one chunk of transformed tiles (the input's and the output
// gradient's, bf16, 16 positions): within a last-level cache, where the whole batch's (103 MB at
// ResNet-50 224 b32's layer 1) went through memory (measured: src/kernels/conv_candidates.md,
// Winograd).
constexpr int64_t kWinogradChunkBytes = int64_t(16) << 20;

// The candidate's prepared pass (fits must hold) with the weight gradient's chunks of at most
// weight_gradient_chunk_bytes (the candidate: kWinogradChunkBytes; tests: small, for many chunks).
std::unique_ptr<PreparedConv> prepare_winograd(const ConvGeometry& g, ConvPass pass,
                                               int64_t weight_gradient_chunk_bytes);

}  // namespace nostrum::kernels
