// Global average pool forward and backward over NHWC data, parallel over images.
#include "nostrum/layers/global_avg_pool.hpp"

#include <cstdint>

namespace nostrum::layers {

void global_avg_pool_forward(float* out, const float* in, int N, int HW, int C) {
  const float inv = 1.0f / static_cast<float>(HW);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* y = out + static_cast<int64_t>(n) * C;
    const float* x = in + static_cast<int64_t>(n) * HW * C;
    for (int c = 0; c < C; ++c) y[c] = 0.0f;
    for (int i = 0; i < HW; ++i)
      for (int c = 0; c < C; ++c) y[c] += x[static_cast<int64_t>(i) * C + c];
    for (int c = 0; c < C; ++c) y[c] *= inv;
  }
}

void global_avg_pool_backward(float* d_in, const float* d_out, int N, int HW, int C) {
  const float inv = 1.0f / static_cast<float>(HW);
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < HW; ++i) {
      const float* dy = d_out + static_cast<int64_t>(n) * C;
      float* dx = d_in + (static_cast<int64_t>(n) * HW + i) * C;
      for (int c = 0; c < C; ++c) dx[c] = dy[c] * inv;
    }
}

}  // namespace nostrum::layers
