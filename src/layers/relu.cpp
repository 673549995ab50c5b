// ReLU forward and backward, elementwise and OpenMP-parallel.
#include "nostrum/layers/relu.hpp"

#include <algorithm>

#include "nostrum/kernels/relu_mask.hpp"

namespace nostrum::layers {

void relu_forward(float* out, const float* in, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = std::max(in[i], 0.0f);
}

void relu_backward(float* d_in, const float* d_out, const float* out, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) d_in[i] = kernels::relu_grad(d_out[i], out[i]);
}

}  // namespace nostrum::layers
