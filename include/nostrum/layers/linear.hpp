// Linear (fully connected) layer with PyTorch's weight layout (K out, C in) and a bias. In a model
// the three products run on the conv kernel table instead (a 1x1 convolution of a 1x1 image:
// out (N,1,1,K) from in (N,1,1,C) and weight (K,C,1,1), the same memory): the bias steps below
// complete them.
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

// out (N,K) += bias (K) on every row.
void linear_add_bias(float* out, const float* bias, int N, int K);

// d_bias (K) OVERWRITTEN with the column sums of d_out (N,K).
void linear_bias_gradient(float* d_bias, const float* d_out, int N, int K);

}  // namespace nostrum::layers
