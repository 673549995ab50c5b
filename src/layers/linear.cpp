// Linear forward/backward as three GEMMs (row-major) plus a bias broadcast and column sum; the
// bias steps on their own, for the model, whose products run on the conv kernel table.
#include "nostrum/layers/linear.hpp"

#include <cstdint>

#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/gemm.hpp"

namespace nostrum::layers {

using kernels::Trans;

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N,
                    int C, int K, kernels::Precision precision) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) out[static_cast<int64_t>(n) * K + k] = bias[k];
  kernels::gemm(precision, Trans::kNo, Trans::kYes, N, K, C, 1.0f, in, C, weight, C, 1.0f, out, K);
}

void linear_add_bias(float* out, const float* bias, int N, int K) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) out[static_cast<int64_t>(n) * K + k] += bias[k];
}

void linear_bias_gradient(float* d_bias, const float* d_out, int N, int K) {
#pragma omp parallel for schedule(static)
  for (int k = 0; k < K; ++k) {
    float s = 0.0f;
    for (int n = 0; n < N; ++n) s += d_out[static_cast<int64_t>(n) * K + k];
    d_bias[k] = s;
  }
}

void linear_backward(float* d_in, float* d_weight, float* d_bias, const float* d_out,
                     const float* in, const float* weight, int N, int C, int K,
                     kernels::Precision precision) {
  kernels::gemm(precision, Trans::kYes, Trans::kNo, K, C, N, 1.0f, d_out, K, in, C, 0.0f, d_weight,
                C);
  linear_bias_gradient(d_bias, d_out, N, K);
  if (d_in)
    kernels::gemm(precision, Trans::kNo, Trans::kNo, N, C, K, 1.0f, d_out, K, weight, C, 0.0f, d_in,
                  C);
}

}  // namespace nostrum::layers
