// Direct NHWC convolution for small channel counts, without im2col: AVX-512 register tiles (16
// output channels per vector, up to 14 pixels per weight load), picked at run time when the CPU
// has AVX-512F (never -march=native). Every output value is summed by one thread in a fixed order,
// so forward and backward-data give the same bits for any thread count; the weight gradient sums
// per-thread partials in thread order, reproducible for a fixed thread count.
#pragma once

#include <cstddef>

#include "nostrum/kernels/window.hpp"

namespace nostrum::kernels {

// Shapes are ConvGeometry (kernels/window.hpp): input (N, H, W, C), weights (K, C, R, S) in
// PyTorch's layout, output (N, P, Q, K).

// Whether this CPU runs the kernels (AVX-512F; checked once).
bool direct_conv_available();

// Whether each pass can run directly for this shape on this CPU: stride 1 or 2, and K % 16 == 0
// (forward, weight gradient) or C % 16 == 0 (data gradient: C is its output).
bool direct_conv_forward_fits(const ConvGeometry& s);
bool direct_conv_backward_data_fits(const ConvGeometry& s);
bool direct_conv_backward_weights_fits(const ConvGeometry& s);

// Floats of `packed` the forward and backward-data calls need (the weights reordered).
size_t direct_conv_packed_floats(const ConvGeometry& s);

// out (N,P,Q,K) = conv(in, weight).
void direct_conv_forward(float* out, const float* in, const float* weight, const ConvGeometry& s,
                         float* packed);

// d_in (N,H,W,C) = (or += when accumulate) the input gradient from d_out (N,P,Q,K).
void direct_conv_backward_data(float* d_in, const float* d_out, const float* weight,
                               const ConvGeometry& s, float* packed, bool accumulate);

// d_weight (K,C,R,S) = the weight gradient from d_out (N,P,Q,K) and in (N,H,W,C).
void direct_conv_backward_weights(float* d_weight, const float* d_out, const float* in,
                                  const ConvGeometry& s);

}  // namespace nostrum::kernels
