// MaxPool2d NHWC forward (window scan, channels innermost) and backward (scatter to the recorded
// winners, parallel over images and channel blocks so no two threads touch the same input).
#include "nostrum/layers/max_pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nostrum/core/isa_dispatch.hpp"

namespace nostrum::layers {

namespace {

// y (C), idx (C) take x (C) where x > y or x is NaN (PyTorch's rule; the first maximum wins a tie).
// Branch-free so that it vectorises; one copy per ISA, picked through the CPU features table
// (nostrum/core/isa_dispatch.hpp).
NOSTRUM_ALWAYS_INLINE void take_max_body(float* __restrict y, int32_t* __restrict idx,
                                         const float* __restrict x, int32_t pos, int C) {
  for (int c = 0; c < C; ++c) {
    const float v = x[c];
    const bool take = v > y[c] || v != v;
    y[c] = take ? v : y[c];
    idx[c] = take ? pos : idx[c];
  }
}
NOSTRUM_ISA_VARIANTS(, DispatchSite::kMaxPoolScan, take_max,
                     (float* __restrict y, int32_t* __restrict idx, const float* __restrict x,
                      int32_t pos, int C),
                     (y, idx, x, pos, C))

}  // namespace

void max_pool_forward(float* out, int32_t* argmax, const float* in, const PoolGeometry& g) {
  const int P = g.P(), Q = g.Q(), C = g.C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < g.N; ++n) {
    for (int p = 0; p < P; ++p) {
      const float* image = in + static_cast<int64_t>(n) * g.H * g.W * C;
      for (int q = 0; q < Q; ++q) {
        float* y = out + ((static_cast<int64_t>(n) * P + p) * Q + q) * C;
        int32_t* idx = argmax + ((static_cast<int64_t>(n) * P + p) * Q + q) * C;
        for (int c = 0; c < C; ++c) {
          y[c] = -std::numeric_limits<float>::infinity();
          idx[c] = -1;
        }
        const int h0 = p * g.stride - g.pad, w0 = q * g.stride - g.pad;
        for (int h = std::max(h0, 0); h < std::min(h0 + g.R, g.H); ++h) {
          for (int w = std::max(w0, 0); w < std::min(w0 + g.S, g.W); ++w) {
            const int32_t pos = h * g.W + w;
            const float* x = image + static_cast<int64_t>(pos) * C;
            take_max(y, idx, x, pos, C);
          }
        }
      }
    }
  }
}

void max_pool_backward(float* d_in, const float* d_out, const int32_t* argmax,
                       const PoolGeometry& g) {
  const int P = g.P(), Q = g.Q(), C = g.C;
  constexpr int kBlock = 16;
  const int blocks = (C + kBlock - 1) / kBlock;
  const int64_t image_in = static_cast<int64_t>(g.H) * g.W * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < g.N; ++n) {
    for (int b = 0; b < blocks; ++b) {
      const int c0 = b * kBlock, c1 = std::min(C, c0 + kBlock);
      float* dx = d_in + n * image_in;
      for (int64_t i = 0; i < static_cast<int64_t>(g.H) * g.W; ++i)
        for (int c = c0; c < c1; ++c) dx[i * C + c] = 0.0f;
      for (int64_t o = 0; o < static_cast<int64_t>(P) * Q; ++o) {
        const int64_t base = (static_cast<int64_t>(n) * P * Q + o) * C;
        for (int c = c0; c < c1; ++c) {
          const int32_t pos = argmax[base + c];
          if (pos >= 0) dx[static_cast<int64_t>(pos) * C + c] += d_out[base + c];
        }
      }
    }
  }
}

}  // namespace nostrum::layers
