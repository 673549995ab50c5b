// Convolution on small output maps by output pixel, each pixel a GEMM per tap whose input pixel
// lies inside the image (kernels/conv_candidate.hpp's "pixel_taps_openblas" fp32 and
// "pixel_taps_bf16"). An im2col GEMM multiplies the padding too: a 3x3 pad-1 convolution on a 2x2
// map has 16 taps of 36 inside the image, on 4x4 100 of 144, on 7x7 361 of 441 (ResNet-50's layer 4
// at 64x64 and 224, layer 3 at 64x64). All three passes.
#pragma once

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// Output pixels (P * Q) up to which the pixel-taps candidates fit: beyond it the padding is a few
// per cent of the products and the per-pixel GEMMs (N rows each) too short.
inline constexpr int kPixelTapsMaxPixels = 64;

// fp32 through the BLAS wrapper (OpenBLAS), and bf16 through nostrum's bf16 GEMM (AVX512_BF16).
const ConvCandidate& pixel_taps_fp32_candidate();
const ConvCandidate& pixel_taps_bf16_candidate();

}  // namespace nostrum::kernels
