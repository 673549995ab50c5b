// Residual add, fused add+ReLU and gradient accumulation, elementwise and OpenMP-parallel.
#include "nostrum/layers/residual_add.hpp"

#include <algorithm>

#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/relu_mask.hpp"

namespace nostrum::layers {

void residual_add_forward(float* out, const float* a, const float* b, int64_t count, bool relu) {
  if (relu) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) out[i] = std::max(a[i] + b[i], 0.0f);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  }
}

void add_relu_backward(float* d_sum, const float* d_out, const float* out, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) d_sum[i] = kernels::relu_grad(d_out[i], out[i]);
}

void add_relu_backward(float* d_sum, const float* d_out, const uint16_t* out_bf16, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i)
    d_sum[i] = kernels::relu_grad(d_out[i], kernels::bf16_to_fp32(out_bf16[i]));
}

void accumulate(float* acc, const float* x, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
}

}  // namespace nostrum::layers
