// Sliding-window geometry shared by convolution and pooling: the one definition of a window's
// output size, and the convolution geometry every conv path (GEMM, im2col, direct kernels) takes.
// Input (N, H, W, C) NHWC, weights (K, C, R, S) in PyTorch's layout, output (N, P, Q, K).
#pragma once

#include <cstddef>

namespace nostrum::kernels {

// Output positions along one axis: a window of `kernel` taps moved by `stride` over `in` positions
// padded by `pad` on both sides (PyTorch's floor rule). Below 1 when the window does not fit.
constexpr int window_output_size(int in, int kernel, int stride, int pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

struct ConvGeometry {
  int N = 1, H = 1, W = 1, C = 1;  // input
  int K = 1, R = 1, S = 1;         // output channels, kernel height and width
  int stride = 1, pad = 0;
  int P() const { return window_output_size(H, R, stride, pad); }
  int Q() const { return window_output_size(W, S, stride, pad); }
  double forward_flops() const { return 2.0 * N * P() * Q() * K * C * R * S; }
  // Values in the input (and its gradient), the output (and its gradient) and the weights.
  size_t input_floats() const { return size_t(N) * H * W * C; }
  size_t output_floats() const { return size_t(N) * P() * Q() * K; }
  size_t weight_floats() const { return size_t(K) * C * R * S; }
};

}  // namespace nostrum::kernels
