// Linear (fully connected) layer with PyTorch's weight layout (K out, C in) and a bias.
#pragma once

namespace nostrum::layers {

// out (N,K) = in (N,C) * weight (K,C)^T + bias (K).
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N,
                    int C, int K);

// d_weight (K,C) and d_bias (K) are OVERWRITTEN; d_in (N,C) is overwritten unless nullptr.
void linear_backward(float* d_in, float* d_weight, float* d_bias, const float* d_out,
                     const float* in, const float* weight, int N, int C, int K);

}  // namespace nostrum::layers
