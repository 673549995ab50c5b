// MaxPool2d NHWC forward (window scan, channels innermost; fp32, or bf16 in and out) and backward
// (scatter to the recorded winners, parallel over images and channel slices so no two threads touch
// the same input, each input row zeroed just before the scatter reaches it).
#include "nostrum/layers/max_pool.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"

namespace nostrum::layers {

namespace {

NOSTRUM_ALWAYS_INLINE float widen(float v) {
  return v;
}
NOSTRUM_ALWAYS_INLINE float widen(uint16_t v) {
  return kernels::bf16_to_fp32(v);
}

// Channels per slice of a bf16 output pixel's fp32 maxima, on the stack (ResNets pool 64).
constexpr int kSliceChannels = 4096;

// Output row p of one image: out (Q, C), idx (Q, C) from image (H, W, C). Each output pixel's
// y starts at -inf and takes x where x > y or x is NaN (PyTorch's rule; the first maximum wins a
// tie), channels in slices of at most kSliceChannels, branch-free so that it vectorises. T is
// float (y is the output itself), or uint16_t for bf16 in and out: a bf16 maximum is found in
// fp32 (y on the stack) and stored back exactly (it is one of the bf16 inputs, -inf or NaN). One
// copy per ISA, picked through the CPU features table (nostrum/core/isa_dispatch.hpp), once per
// row.
template <typename T>
NOSTRUM_ALWAYS_INLINE void pool_row_body(T* __restrict out, int32_t* __restrict idx,
                                         const T* __restrict image, const PoolGeometry& g, int p) {
  const int Q = g.Q(), C = g.C;
  const int h0 = p * g.stride - g.pad;
  const int h_begin = std::max(h0, 0), h_end = std::min(h0 + g.R, g.H);
  float slice[std::is_same_v<T, float> ? 1 : kSliceChannels];
  for (int q = 0; q < Q; ++q) {
    const int w0 = q * g.stride - g.pad;
    const int w_begin = std::max(w0, 0), w_end = std::min(w0 + g.S, g.W);
    for (int c0 = 0; c0 < C; c0 += kSliceChannels) {
      const int n = std::min(kSliceChannels, C - c0);
      const int64_t at = static_cast<int64_t>(q) * C + c0;
      float* y;
      if constexpr (std::is_same_v<T, float>)
        y = out + at;
      else
        y = slice;
      int32_t* ix = idx + at;
      for (int c = 0; c < n; ++c) {
        y[c] = -std::numeric_limits<float>::infinity();
        ix[c] = -1;
      }
      for (int h = h_begin; h < h_end; ++h)
        for (int w = w_begin; w < w_end; ++w) {
          const int32_t pos = h * g.W + w;
          const T* x = image + static_cast<int64_t>(pos) * C + c0;
          for (int c = 0; c < n; ++c) {
            const float v = widen(x[c]);
            const bool take = v > y[c] || v != v;
            y[c] = take ? v : y[c];
            ix[c] = take ? pos : ix[c];
          }
        }
      if constexpr (!std::is_same_v<T, float>)
        for (int c = 0; c < n; ++c) out[at + c] = kernels::fp32_to_bf16(y[c]);
    }
  }
}
NOSTRUM_ISA_VARIANTS(template <typename T>, DispatchSite::kMaxPoolScan, pool_row,
                     (T* __restrict out, int32_t* __restrict idx, const T* __restrict image,
                      const PoolGeometry& g, int p),
                     (out, idx, image, g, p))

template <typename T>
void max_pool_forward_t(T* out, int32_t* argmax, const T* in, const PoolGeometry& g) {
  const int P = g.P(), Q = g.Q(), C = g.C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < g.N; ++n)
    for (int p = 0; p < P; ++p) {
      const int64_t at = (static_cast<int64_t>(n) * P + p) * Q * C;
      pool_row(out + at, argmax + at, in + static_cast<int64_t>(n) * g.H * g.W * C, g, p);
    }
}

}  // namespace

void max_pool_forward(float* out, int32_t* argmax, const float* in, const PoolGeometry& g) {
  max_pool_forward_t(out, argmax, in, g);
}

void max_pool_forward(uint16_t* out, int32_t* argmax, const uint16_t* in, const PoolGeometry& g) {
  max_pool_forward_t(out, argmax, in, g);
}

void max_pool_backward(float* d_in, const float* d_out, const int32_t* argmax,
                       const PoolGeometry& g) {
  const int P = g.P(), Q = g.Q(), C = g.C;
  // Whole pixels per task (one slice: rows zeroed and scattered contiguously) when the images
  // keep the threads busy, else as many 16-channel slices as the threads need.
  constexpr int kBlock = 16;
  const int threads = omp_get_max_threads();
  const int slices = std::min((C + kBlock - 1) / kBlock, std::max(1, (threads + g.N - 1) / g.N));
  const int width = ((C + slices - 1) / slices + kBlock - 1) / kBlock * kBlock;
  const int64_t image_in = static_cast<int64_t>(g.H) * g.W * C;
  const int64_t image_out = static_cast<int64_t>(P) * Q * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < g.N; ++n) {
    for (int sl = 0; sl < slices; ++sl) {
      const int c0 = sl * width, c1 = std::min(C, c0 + width);
      float* dx = d_in + n * image_in;
      const float* dy = d_out + n * image_out;
      const int32_t* winner = argmax + n * image_out;
      // Input rows [0, zeroed) are zeroed; each row just before the first window that reaches
      // it, so it is still in cache when the scatter adds into it.
      int zeroed = 0;
      const auto zero_rows_below = [&](int h_end) {
        for (; zeroed < h_end; ++zeroed)
          for (int64_t w = 0; w < g.W; ++w) {
            float* row = dx + (static_cast<int64_t>(zeroed) * g.W + w) * C;
            for (int c = c0; c < c1; ++c) row[c] = 0.0f;
          }
      };
      for (int p = 0; p < P; ++p) {
        zero_rows_below(std::min(g.H, p * g.stride - g.pad + g.R));
        for (int64_t o = static_cast<int64_t>(p) * Q; o < static_cast<int64_t>(p + 1) * Q; ++o)
          for (int c = c0; c < c1; ++c) {
            const int32_t pos = winner[o * C + c];
            if (pos >= 0) dx[static_cast<int64_t>(pos) * C + c] += dy[o * C + c];
          }
      }
      zero_rows_below(g.H);
    }
  }
}

}  // namespace nostrum::layers
