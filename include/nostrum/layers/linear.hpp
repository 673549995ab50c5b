// Linear (fully connected) layer with PyTorch's weight layout (K out, C in) and a bias.
#pragma once

#include "nostrum/kernels/bf16.hpp"

namespace nostrum::layers {

// out (N,K) = in (N,C) * weight (K,C)^T + bias (K). bf16: the three GEMMs take bf16 operands and
// sum in fp32 (kernels/bf16.hpp); the bias and its gradient stay fp32.
void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N,
                    int C, int K, kernels::Precision precision = kernels::Precision::kFp32);

// d_weight (K,C) and d_bias (K) are OVERWRITTEN; d_in (N,C) is overwritten unless nullptr.
void linear_backward(float* d_in, float* d_weight, float* d_bias, const float* d_out,
                     const float* in, const float* weight, int N, int C, int K,
                     kernels::Precision precision = kernels::Precision::kFp32);

}  // namespace nostrum::layers
