// BatchNorm2d kernels over (rows, C) NHWC data: chunked double-precision partial sums combined in a
// fixed chunk order (deterministic for any thread count), then one elementwise pass. Compiled with
// -ffp-contract=off (sources.cmake): no multiply-add is fused behind the code's back, so each ISA's
// copy and each operand type's instantiation of a row kernel round alike, bit for bit.
#include "nostrum/layers/batch_norm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/relu_mask.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include "batch_norm_avx512.hpp"
#endif

namespace nostrum::layers {

namespace {

// Fixed number of row chunks: partial sums are per chunk, so the summation order is the same for
// any thread count.
constexpr int64_t kChunks = 64;

// The rows split into the fixed chunks: chunk k is rows [begin(k), end(k)), empty past the last
// row. Every pass that sums per chunk (and the add + ReLU backward that runs a norm's first pass)
// splits alike through it.
struct RowChunks {
  explicit RowChunks(int64_t rows)
      : rows(rows),
        count(std::max<int64_t>(1, std::min(kChunks, rows))),
        per((rows + count - 1) / count) {}
  int64_t begin(int64_t k) const { return std::min(rows, k * per); }
  int64_t end(int64_t k) const { return std::min(rows, (k + 1) * per); }
  int64_t rows, count, per;
};

// partial (chunks, C) doubles; per chunk, rows_fn(acc, first_row, row_count) sums its rows into
// acc. total (C) = the chunks' sums added in chunk order.
template <typename RowsFn>
void chunked_channel_sums(double* total, double* partial, int64_t rows, int C, RowsFn rows_fn) {
  const RowChunks chunks(rows);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks.count; ++k) {
    double* acc = partial + k * C;
    for (int c = 0; c < C; ++c) acc[c] = 0.0;
    const int64_t r0 = chunks.begin(k), r1 = chunks.end(k);
    if (r1 > r0) rows_fn(acc, r0, r1 - r0);
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    double s = 0.0;
    for (int64_t k = 0; k < chunks.count; ++k) s += partial[k * C + c];
    total[c] = s;
  }
}

// Row kernels, vectorised across channels (each lane one channel, rows summed in order, so every
// ISA gives the same bits); one copy per ISA of each, picked through the CPU features table
// (nostrum/core/isa_dispatch.hpp; no -march=native). Each operand is fp32 or bf16 (a template
// parameter): a bf16 operand is widened exactly in the register as it is loaded and a bf16 result
// rounded as it is stored (kernels/bf16.hpp's rounding), so a bf16 tensor costs no pass of its own
// and gives the bits of an fp32 one holding the same values. The AVX-512 copy of the hot ones
// (NOSTRUM_ISA_VARIANTS_HAND_AVX512 below) is written in intrinsics in batch_norm_avx512.hpp: the
// same operations per lane in the same order, so the same bits (tests/engine/batch_norm_isa_test).
NOSTRUM_ALWAYS_INLINE float load_value(const float* p, int64_t i) {
  return p[i];
}
NOSTRUM_ALWAYS_INLINE float load_value(const uint16_t* p, int64_t i) {
  return kernels::bf16_to_fp32(p[i]);
}
NOSTRUM_ALWAYS_INLINE void store_value(float* p, int64_t i, float v) {
  p[i] = v;
}
NOSTRUM_ALWAYS_INLINE void store_value(uint16_t* p, int64_t i, float v) {
  p[i] = kernels::fp32_to_bf16(v);
}
// a * b + c rounded once, written out where the kernels want it (the file is compiled without
// contraction): one instruction in the AVX-512 and AVX2 copies and on aarch64, a library call in
// an x86 baseline copy (a CPU without AVX2 and FMA), the same bits in all.
NOSTRUM_ALWAYS_INLINE float madd(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);
}

// The row kernels' channel loops, vectorised 16 channels a step whatever the operand types: left
// to itself the compiler sizes the step by the narrowest type, 32 channels a step for a bf16
// operand in a zmm register, and a layer of 16 channels (resnet8's first stage) then ran entirely
// in the scalar remainder loop, 2.6-3x slower than its fp32 twin. Each lane is one channel, as
// before: the same operations in the same order, so the same bits.
#define NOSTRUM_CHANNEL_LANES _Pragma("omp simd simdlen(16)")

// Sums over rows go through float partials of kBlockRows rows (each lane one channel, in row order)
// added into the double accumulators: the double conversions and adds were most of the statistics
// pass (compute-bound at twice the time of a memory pass); the float error of 16 terms is ~1e-6 of
// their magnitudes, and everything beyond stays in double. The partials live on the stack, for
// slices of at most kSliceChannels channels (ResNets have at most 2048).
constexpr int64_t kBlockRows = 16;
constexpr int kSliceChannels = 4096;
#if defined(__x86_64__) || defined(__i386__)
static_assert(bn_avx512::kBlockRows == kBlockRows, "the AVX-512 sums take the same row blocks");
#endif

// acc (C) += sum over rows of x (rows, C).
template <typename X>
NOSTRUM_ALWAYS_INLINE void sum_rows_body(double* __restrict acc, const X* __restrict x,
                                         int64_t rows, int C) {
  float part[kSliceChannels];
  for (int c0 = 0; c0 < C; c0 += kSliceChannels) {
    const int n = std::min(kSliceChannels, C - c0);
    for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
      const int64_t m = std::min(kBlockRows, rows - r0);
      const X* xr = x + r0 * C + c0;
      NOSTRUM_CHANNEL_LANES
      for (int c = 0; c < n; ++c) part[c] = load_value(xr, c);
      for (int64_t r = 1; r < m; ++r) {
        NOSTRUM_CHANNEL_LANES
        for (int c = 0; c < n; ++c) part[c] += load_value(xr, r * C + c);
      }
      for (int c = 0; c < n; ++c) acc[c0 + c] += part[c];
    }
  }
}
NOSTRUM_ISA_VARIANTS(template <typename X>, DispatchSite::kBatchNormRows, sum_rows,
                     (double* __restrict acc, const X* __restrict x, int64_t rows, int C),
                     (acc, x, rows, C))

// acc (C) += sum over rows of (x - mean)^2 around mean (C, float or double; the deviations are
// formed in float around the mean rounded to float, as the normalising pass forms x - mean).
template <typename X, typename Mean>
NOSTRUM_ALWAYS_INLINE void squared_deviation_rows_body(double* __restrict acc,
                                                       const X* __restrict x,
                                                       const Mean* __restrict mean, int64_t rows,
                                                       int C) {
  float m[kSliceChannels], part[kSliceChannels];
  for (int c0 = 0; c0 < C; c0 += kSliceChannels) {
    const int n = std::min(kSliceChannels, C - c0);
    for (int c = 0; c < n; ++c) m[c] = static_cast<float>(mean[c0 + c]);
    for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
      const int64_t rn = std::min(kBlockRows, rows - r0);
      const X* xr = x + r0 * C + c0;
      for (int c = 0; c < n; ++c) part[c] = 0.0f;
      for (int64_t r = 0; r < rn; ++r) {
        NOSTRUM_CHANNEL_LANES
        for (int c = 0; c < n; ++c) {
          const float d = load_value(xr, r * C + c) - m[c];
          part[c] = madd(d, d, part[c]);
        }
      }
      for (int c = 0; c < n; ++c) acc[c0 + c] += part[c];
    }
  }
}
NOSTRUM_ISA_VARIANTS(template <typename X NOSTRUM_COMMA typename Mean>,
                     DispatchSite::kBatchNormRows, squared_deviation_rows,
                     (double* __restrict acc, const X* __restrict x, const Mean* __restrict mean,
                      int64_t rows, int C),
                     (acc, x, mean, rows, C))

// y = (x - mean) * (invstd * gamma) + beta (+ z), then ReLU when relu; (rows, C) each; the
// multiply-add fused.
template <typename Y, typename X, typename Z>
NOSTRUM_ALWAYS_INLINE void normalize_rows_body(Y* __restrict y, const X* __restrict x,
                                               const Z* __restrict z, const float* __restrict mean,
                                               const float* __restrict invstd,
                                               const float* __restrict gamma,
                                               const float* __restrict beta, int64_t rows, int C,
                                               bool relu) {
  // invstd * gamma once per channel slice, not per row: the same float product, so the same bits.
  float scale[kSliceChannels];
  for (int c0 = 0; c0 < C; c0 += kSliceChannels) {
    const int n = std::min(kSliceChannels, C - c0);
    for (int c = 0; c < n; ++c) scale[c] = invstd[c0 + c] * gamma[c0 + c];
    const float* m = mean + c0;
    const float* b = beta + c0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = r * C + c0;
      const X* xr = x + at;
      Y* yr = y + at;
      if (z) {
        const Z* zr = z + at;
        NOSTRUM_CHANNEL_LANES
        for (int c = 0; c < n; ++c) {
          const float v = madd(load_value(xr, c) - m[c], scale[c], b[c]) + load_value(zr, c);
          store_value(yr, c, relu ? std::max(v, 0.0f) : v);
        }
      } else {
        NOSTRUM_CHANNEL_LANES
        for (int c = 0; c < n; ++c) {
          const float v = madd(load_value(xr, c) - m[c], scale[c], b[c]);
          store_value(yr, c, relu ? std::max(v, 0.0f) : v);
        }
      }
    }
  }
}
NOSTRUM_ISA_VARIANTS_HAND_AVX512(
    template <typename Y NOSTRUM_COMMA typename X NOSTRUM_COMMA typename Z>,
    DispatchSite::kBatchNormRows, normalize_rows, bn_avx512::normalize_rows,
    (Y* __restrict y, const X* __restrict x, const Z* __restrict z, const float* __restrict mean,
     const float* __restrict invstd, const float* __restrict gamma, const float* __restrict beta,
     int64_t rows, int C, bool relu),
    (y, x, z, mean, invstd, gamma, beta, rows, C, relu))

// a (width) += sum of g, b (width) += sum of g * (x - mean), g = dy masked by y > 0 when y is
// given; float partials of kBlockRows rows as above. Rows of `stride` floats, of which the first
// `width` channels (every pointer at the slice's first channel). kStoreMasked (y given): g is
// formed from dy + add where add is given (the float add a separate pass would make), and stored
// over dy. kNorms 2 (kStoreMasked): a second norm's sums too, a2 += sum of g (the same sums as a)
// and b2 += sum of g * (x2 - mean2), with the operations of the first. The loops with and without
// add are written out apart on purpose: one loop on a template flag (`kAdd ? dy + add : dy`) ran
// the finisher about 25 % slower on the Zen 5 (100352 x 256 bf16, one norm 8.9-10.5 ms against
// 6.9-8.4), as GCC vectorised it.
template <bool kStoreMasked, int kNorms, typename X, typename X2, typename Y>
NOSTRUM_ALWAYS_INLINE void gradient_sums(
    double* __restrict a, double* __restrict b, double* __restrict a2, double* __restrict b2,
    std::conditional_t<kStoreMasked, float, const float>* __restrict dy,
    const float* __restrict add, const X* __restrict x, const X2* __restrict x2,
    const Y* __restrict y, const float* __restrict mean, const float* __restrict mean2,
    int64_t rows, int64_t stride, int width) {
  static_assert(kNorms == 1 || kStoreMasked, "a second norm's sums only with the stored mask");
  float pa[kSliceChannels], pb[kSliceChannels], pb2[kNorms == 2 ? kSliceChannels : 1];
  for (int c0 = 0; c0 < width; c0 += kSliceChannels) {
    const int n = std::min(kSliceChannels, width - c0);
    const float* mc = mean + c0;
    const float* m2 = kNorms == 2 ? mean2 + c0 : mean2;
    for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
      const int64_t rn = std::min(kBlockRows, rows - r0);
      const int64_t at = r0 * stride + c0;
      auto* dyr = dy + at;
      const X* xr = x + at;
      const X2* x2r = kNorms == 2 ? x2 + at : x2;
      for (int c = 0; c < n; ++c) pa[c] = pb[c] = 0.0f;
      if constexpr (kNorms == 2)
        for (int c = 0; c < n; ++c) pb2[c] = 0.0f;
      if (y) {
        const Y* yr = y + at;
        const float* addr = add ? add + at : nullptr;
        for (int64_t r = 0; r < rn; ++r) {
          const int64_t o = r * stride;
          if (addr) {
            NOSTRUM_CHANNEL_LANES
            for (int c = 0; c < n; ++c) {
              const float g = kernels::relu_grad(dyr[o + c] + addr[o + c], load_value(yr, o + c));
              if constexpr (kStoreMasked) dyr[o + c] = g;
              pa[c] += g;
              pb[c] = madd(g, load_value(xr, o + c) - mc[c], pb[c]);
              if constexpr (kNorms == 2) pb2[c] = madd(g, load_value(x2r, o + c) - m2[c], pb2[c]);
            }
          } else {
            NOSTRUM_CHANNEL_LANES
            for (int c = 0; c < n; ++c) {
              const float g = kernels::relu_grad(dyr[o + c], load_value(yr, o + c));
              if constexpr (kStoreMasked) dyr[o + c] = g;
              pa[c] += g;
              pb[c] = madd(g, load_value(xr, o + c) - mc[c], pb[c]);
              if constexpr (kNorms == 2) pb2[c] = madd(g, load_value(x2r, o + c) - m2[c], pb2[c]);
            }
          }
        }
      } else {
        for (int64_t r = 0; r < rn; ++r) {
          const int64_t o = r * stride;
          NOSTRUM_CHANNEL_LANES
          for (int c = 0; c < n; ++c) {
            const float g = dyr[o + c];
            pa[c] += g;
            pb[c] = madd(g, load_value(xr, o + c) - mc[c], pb[c]);
          }
        }
      }
      for (int c = 0; c < n; ++c) {
        a[c0 + c] += pa[c];
        b[c0 + c] += pb[c];
      }
      if constexpr (kNorms == 2)
        for (int c = 0; c < n; ++c) {
          a2[c0 + c] += pa[c];
          b2[c0 + c] += pb2[c];
        }
    }
  }
}
template <typename X, typename Y>
NOSTRUM_ALWAYS_INLINE void backward_sum_rows_body(double* __restrict a, double* __restrict b,
                                                  const float* __restrict dy, const X* __restrict x,
                                                  const Y* __restrict y,
                                                  const float* __restrict mean, int64_t rows,
                                                  int64_t stride, int width) {
  gradient_sums<false, 1>(a, b, nullptr, nullptr, dy, nullptr, x, static_cast<const X*>(nullptr), y,
                          mean, nullptr, rows, stride, width);
}
NOSTRUM_ISA_VARIANTS_HAND_AVX512(
    template <typename X NOSTRUM_COMMA typename Y>, DispatchSite::kBatchNormRows, backward_sum_rows,
    bn_avx512::backward_sum_rows,
    (double* __restrict a, double* __restrict b, const float* __restrict dy, const X* __restrict x,
     const Y* __restrict y, const float* __restrict mean, int64_t rows, int64_t stride, int width),
    (a, b, dy, x, y, mean, rows, stride, width))

// backward_sum_rows with y, the masked gradient also stored: dy = (dy + add, where add is given)
// masked by y > 0, in place, and a, b (width) += its sums as backward_sum_rows sums them (the same
// operations in the same order, so the same bits as adding, masking, then summing).
template <typename X, typename Y>
NOSTRUM_ALWAYS_INLINE void mask_sum_rows_body(double* __restrict a, double* __restrict b,
                                              float* __restrict dy, const float* __restrict add,
                                              const X* __restrict x, const Y* __restrict y,
                                              const float* __restrict mean, int64_t rows,
                                              int64_t stride, int width) {
  gradient_sums<true, 1>(a, b, nullptr, nullptr, dy, add, x, static_cast<const X*>(nullptr), y,
                         mean, nullptr, rows, stride, width);
}
NOSTRUM_ISA_VARIANTS_HAND_AVX512(template <typename X NOSTRUM_COMMA typename Y>,
                                 DispatchSite::kBatchNormRows, mask_sum_rows,
                                 bn_avx512::mask_sum_rows,
                                 (double* __restrict a, double* __restrict b, float* __restrict dy,
                                  const float* __restrict add, const X* __restrict x,
                                  const Y* __restrict y, const float* __restrict mean, int64_t rows,
                                  int64_t stride, int width),
                                 (a, b, dy, add, x, y, mean, rows, stride, width))

// mask_sum_rows for two norms in one pass: dy = (dy + add, where add is given) masked by y > 0,
// stored, and (a1, b1) += its sums against x1 around mean1, (a2, b2) against x2 around mean2, each
// with the operations backward_sum_rows makes on the stored gradient, in the same order (so the
// bits of mask_sum_rows for the first and backward_sum_rows for the second).
template <typename X1, typename X2, typename Y>
NOSTRUM_ALWAYS_INLINE void mask_sum2_rows_body(double* __restrict a1, double* __restrict b1,
                                               double* __restrict a2, double* __restrict b2,
                                               float* __restrict dy, const float* __restrict add,
                                               const X1* __restrict x1, const X2* __restrict x2,
                                               const Y* __restrict y, const float* __restrict mean1,
                                               const float* __restrict mean2, int64_t rows,
                                               int64_t stride, int width) {
  gradient_sums<true, 2>(a1, b1, a2, b2, dy, add, x1, x2, y, mean1, mean2, rows, stride, width);
}
NOSTRUM_ISA_VARIANTS_HAND_AVX512(
    template <typename X1 NOSTRUM_COMMA typename X2 NOSTRUM_COMMA typename Y>,
    DispatchSite::kBatchNormRows, mask_sum2_rows, bn_avx512::mask_sum2_rows,
    (double* __restrict a1, double* __restrict b1, double* __restrict a2, double* __restrict b2,
     float* __restrict dy, const float* __restrict add, const X1* __restrict x1,
     const X2* __restrict x2, const Y* __restrict y, const float* __restrict mean1,
     const float* __restrict mean2, int64_t rows, int64_t stride, int width),
    (a1, b1, a2, b2, dy, add, x1, x2, y, mean1, mean2, rows, stride, width))

// dy = (dy + add, where add is given) masked by y > 0, in place: rows of `stride` floats, the first
// `width` channels of each; the rows mask_sum_rows stores, for rows whose sums come later.
template <typename Y>
NOSTRUM_ALWAYS_INLINE void add_mask_rows_body(float* __restrict dy, const float* __restrict add,
                                              const Y* __restrict y, int64_t rows, int64_t stride,
                                              int width) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * stride;
    if (add) {
      NOSTRUM_CHANNEL_LANES
      for (int c = 0; c < width; ++c)
        dy[o + c] = kernels::relu_grad(dy[o + c] + add[o + c], load_value(y, o + c));
    } else {
      NOSTRUM_CHANNEL_LANES
      for (int c = 0; c < width; ++c)
        dy[o + c] = kernels::relu_grad(dy[o + c], load_value(y, o + c));
    }
  }
}
NOSTRUM_ISA_VARIANTS(template <typename Y>, DispatchSite::kBatchNormRows, add_mask_rows,
                     (float* __restrict dy, const float* __restrict add, const Y* __restrict y,
                      int64_t rows, int64_t stride, int width),
                     (dy, add, y, rows, stride, width))

// dx = ca * g - ck * (x - mean) + cb (two fused multiply-adds), g = dy masked by y > 0 when y is
// given; an fp32 dx may alias dy (so neither is restrict).
template <typename DX, typename X, typename Y>
NOSTRUM_ALWAYS_INLINE void backward_apply_rows_body(
    DX* dx, const float* dy, const X* __restrict x, const Y* __restrict y,
    const float* __restrict mean, const float* __restrict ca, const float* __restrict ck,
    const float* __restrict cb, int64_t rows, int C) {
  for (int64_t r = 0; r < rows; ++r, dx += C, dy += C, x += C) {
    if (y) {
      NOSTRUM_CHANNEL_LANES
      for (int c = 0; c < C; ++c) {
        const float g = kernels::relu_grad(dy[c], load_value(y, c));
        store_value(dx, c, madd(ca[c], g, madd(-ck[c], load_value(x, c) - mean[c], cb[c])));
      }
      y += C;
    } else {
      NOSTRUM_CHANNEL_LANES
      for (int c = 0; c < C; ++c)
        store_value(dx, c, madd(ca[c], dy[c], madd(-ck[c], load_value(x, c) - mean[c], cb[c])));
    }
  }
}
NOSTRUM_ISA_VARIANTS_HAND_AVX512(
    template <typename DX NOSTRUM_COMMA typename X NOSTRUM_COMMA typename Y>,
    DispatchSite::kBatchNormRows, backward_apply_rows, bn_avx512::backward_apply_rows,
    (DX * dx, const float* dy, const X* __restrict x, const Y* __restrict y,
     const float* __restrict mean, const float* __restrict ca, const float* __restrict ck,
     const float* __restrict cb, int64_t rows, int C),
    (dx, dy, x, y, mean, ca, ck, cb, rows, C))

// An operand that is fp32 or bf16 (whichever pointer is given; both may be null), handed to fn as
// its typed pointer offset by `at` elements (null stays null).
template <typename F, typename B, typename Fn>
NOSTRUM_ALWAYS_INLINE void with_operand(F* fp32, B* bf16, int64_t at, Fn&& fn) {
  if (bf16)
    fn(bf16 + at);
  else
    fn(fp32 ? fp32 + at : fp32);
}

void check_rows(double count, int C) {
  NOSTRUM_CHECK(count >= 2, ShapeError,
                "batch norm needs at least 2 values per channel in training, got " +
                    std::to_string(static_cast<long long>(count)),
                "batch_norm over " + std::to_string(C) + " channels",
                "use a larger batch or spatial size");
}

void check_residual(const BatchNormOptions& o) {
  NOSTRUM_CHECK(!(o.residual && o.residual_bf16), ShapeError,
                "a batch norm takes its residual in fp32 or in bf16, not both",
                "batch_norm forward");
}

// What the training forward writes per channel: the batch statistics kept for backward and the
// running estimates it updates.
struct ChannelStatistics {
  float* save_mean;
  float* save_invstd;
  float* running_mean;
  float* running_var;
};

// Channel c's invstd and running estimates from its batch mean (already in save_mean[c]) and
// biased variance var over count values (unbiased for the running variance, as PyTorch).
inline void finish_channel(const ChannelStatistics& s, int c, double var, double count,
                           const BatchNormOptions& options) {
  s.save_invstd[c] = static_cast<float>(1.0 / std::sqrt(var + options.eps));
  const double m = options.momentum;
  s.running_mean[c] = static_cast<float>((1.0 - m) * s.running_mean[c] + m * s.save_mean[c]);
  s.running_var[c] =
      static_cast<float>((1.0 - m) * s.running_var[c] + m * var * count / (count - 1));
}

// Per-rank statistics, step 1 (inside a parallel region): each chunk's mean and squared deviations
// from it (two passes over a chunk that is still in cache), chunk_mean and chunk_m2 (kChunks, C).
void chunk_moments(double* chunk_mean, double* chunk_m2, const float* in, const uint16_t* in_bf16,
                   int64_t rows, int C) {
  const RowChunks chunks(rows);
#pragma omp for schedule(static)
  for (int64_t k = 0; k < chunks.count; ++k) {
    double* mean = chunk_mean + k * C;
    double* m2 = chunk_m2 + k * C;
    for (int c = 0; c < C; ++c) mean[c] = m2[c] = 0.0;
    const int64_t r0 = chunks.begin(k), r1 = chunks.end(k);
    if (r1 > r0) {
      with_operand(in, in_bf16, r0 * C, [&](const auto* x) {
        sum_rows(mean, x, r1 - r0, C);
        for (int c = 0; c < C; ++c) mean[c] /= static_cast<double>(r1 - r0);
        squared_deviation_rows(m2, x, mean, r1 - r0, C);
      });
    }
  }
}

// Per-rank statistics, step 2 (inside a parallel region): the chunks combined in chunk order with
// Chan et al.'s pairwise update: numerically safe like two global passes, in a fixed order.
void combine_chunk_moments(const ChannelStatistics& s, const double* chunk_mean,
                           const double* chunk_m2, int64_t rows, int C,
                           const BatchNormOptions& options) {
  const RowChunks chunks(rows);
  const double count = static_cast<double>(rows);
#pragma omp for schedule(static)
  for (int c = 0; c < C; ++c) {
    double n_a = 0.0, mean_a = 0.0, m2_a = 0.0;
    for (int64_t k = 0; k < chunks.count; ++k) {
      const double n_b = static_cast<double>(chunks.end(k) - chunks.begin(k));
      if (n_b <= 0.0) continue;
      const double n_ab = n_a + n_b, delta = chunk_mean[k * C + c] - mean_a;
      mean_a += delta * (n_b / n_ab);
      m2_a += chunk_m2[k * C + c] + delta * delta * (n_a * n_b / n_ab);
      n_a = n_ab;
    }
    s.save_mean[c] = static_cast<float>(mean_a);
    finish_channel(s, c, m2_a / count, count, options);
  }
}

// Sync-BN statistics: global sums over the reducer's group, so two passes around the global mean
// (the mean, then the squared deviations from it), each summed over the group.
void synced_statistics(const ChannelStatistics& s, double* scratch, const float* in, int64_t rows,
                       int C, const BatchNormOptions& options) {
  double* partial = scratch;                  // (kChunks, C)
  double* total = scratch + 2 * kChunks * C;  // (C + 1): sums, then the count
  const uint16_t* in_bf16 = options.in_bf16;
  chunked_channel_sums(total, partial, rows, C, [&](double* acc, int64_t r, int64_t count) {
    with_operand(in, in_bf16, r * C, [&](const auto* x) { sum_rows(acc, x, count, C); });
  });
  total[C] = static_cast<double>(rows);
  options.reducer->sum(total, C + 1);
  const double count = total[C];
  check_rows(count, C);
  for (int c = 0; c < C; ++c) s.save_mean[c] = static_cast<float>(total[c] / count);
  chunked_channel_sums(total, partial, rows, C, [&](double* acc, int64_t r, int64_t count) {
    with_operand(in, in_bf16, r * C,
                 [&](const auto* x) { squared_deviation_rows(acc, x, s.save_mean, count, C); });
  });
  options.reducer->sum(total, C);
  for (int c = 0; c < C; ++c) finish_channel(s, c, total[c] / count, count, options);
}

// The normalising pass's operands: out = (in - mean) * invstd * gamma + beta (+ residual), ReLU.
struct Normalization {
  float* out;
  const float* in;
  const float* gamma;
  const float* beta;
  const float* mean;
  const float* invstd;
  int64_t rows;
  int C;
  const BatchNormOptions* options;
};

// The calling thread's share of the rows (inside a parallel region), with the options' residual
// and bf16 tensors.
void normalize_thread_rows(const Normalization& n) {
  const int t = omp_get_thread_num(), nt = omp_get_num_threads();
  const int64_t r0 = n.rows * t / nt, r1 = n.rows * (t + 1) / nt;
  if (r1 <= r0) return;
  const BatchNormOptions& o = *n.options;
  const int64_t at = r0 * n.C;
  with_operand(n.out, o.out_bf16, at, [&](auto* y) {
    with_operand(n.in, o.in_bf16, at, [&](const auto* x) {
      with_operand(o.residual, o.residual_bf16, at, [&](const auto* z) {
        normalize_rows(y, x, z, n.mean, n.invstd, n.gamma, n.beta, r1 - r0, n.C, o.fuse_relu);
      });
    });
  });
}

}  // namespace

size_t batch_norm_backward_sums_doubles(int C) {
  return static_cast<size_t>(kChunks) * C * 2;  // sum dy and sum dy*(x-mean), (kChunks, C) each
}

size_t batch_norm_scratch_doubles(int C) {
  // partial sums for two quantities (kChunks, C) each, plus totals (2C + 1, with the count).
  return static_cast<size_t>(kChunks) * C * 2 + 2 * static_cast<size_t>(C) + 1;
}

void batch_norm_forward_training(float* out, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var, const float* in,
                                 const float* gamma, const float* beta, int64_t rows, int C,
                                 const BatchNormOptions& options, double* scratch) {
  check_residual(options);
  const ChannelStatistics stats{save_mean, save_invstd, running_mean, running_var};
  const Normalization norm{out, in, gamma, beta, save_mean, save_invstd, rows, C, &options};
  if (!options.reducer) {
    // One read of the input for both statistics and the normalisation, in one parallel region.
    check_rows(static_cast<double>(rows), C);
#pragma omp parallel
    {
      chunk_moments(scratch, scratch + kChunks * C, in, options.in_bf16, rows, C);
      combine_chunk_moments(stats, scratch, scratch + kChunks * C, rows, C, options);
      normalize_thread_rows(norm);
    }
    return;
  }
  synced_statistics(stats, scratch, in, rows, C, options);
#pragma omp parallel
  normalize_thread_rows(norm);
}

void batch_norm_forward_inference(float* out, const float* in, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, int64_t rows, int C,
                                  const BatchNormOptions& options, float* scratch) {
  check_residual(options);
  // Per channel once: invstd = 1 / sqrt(var + eps), then the training forward's row kernel with
  // the running statistics in place of the batch's (the same expression, so the same bits as before
  // the hoist: (x - mean) * (invstd * gamma) + beta (+ z), ReLU).
  float* invstd = scratch;  // C floats once per layer, not per row
  for (int c = 0; c < C; ++c) invstd[c] = 1.0f / std::sqrt(running_var[c] + options.eps);
  const Normalization norm{out, in, gamma, beta, running_mean, invstd, rows, C, &options};
#pragma omp parallel
  normalize_thread_rows(norm);
}

void batch_norm_backward(float* d_in, float* d_gamma, float* d_beta, const float* d_out,
                         const float* in, const float* out, const float* gamma,
                         const float* save_mean, const float* save_invstd, int64_t rows, int C,
                         const BatchNormOptions& options, double* scratch) {
  // The ReLU mask's forward output (fp32, or bf16 where kept so; none without the ReLU) and the
  // forward input (fp32, or bf16 where kept so).
  const bool relu = options.fuse_relu;
  const float* y_fp32 = relu ? out : nullptr;
  const uint16_t* y_bf16 = relu ? options.out_bf16 : nullptr;
  const uint16_t* x_bf16 = options.in_bf16;
  // The first pass's per-chunk sums: computed here, or given (options.first_pass_sums).
  const double* partial_dy = options.first_pass_sums ? options.first_pass_sums : scratch;
  const double* partial_dyx = partial_dy + kChunks * C;
  double* total = scratch + 2 * kChunks * C;  // (2C + 1): sum dy, sum dy*(x-mean), count
  const RowChunks chunks(rows);
  if (!options.first_pass_sums) {
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < chunks.count; ++k) {
      double* a = scratch + k * C;
      double* b = scratch + (kChunks + k) * C;
      for (int c = 0; c < C; ++c) a[c] = b[c] = 0.0;
      const int64_t r0 = chunks.begin(k), r1 = chunks.end(k);
      if (r1 <= r0) continue;
      with_operand(in, x_bf16, r0 * C, [&](const auto* x) {
        with_operand(y_fp32, y_bf16, r0 * C, [&](const auto* y) {
          backward_sum_rows(a, b, d_out + r0 * C, x, y, save_mean, r1 - r0, C, C);
        });
      });
    }
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    double s = 0.0, t = 0.0;
    for (int64_t k = 0; k < chunks.count; ++k) {
      s += partial_dy[k * C + c];
      t += partial_dyx[k * C + c];
    }
    total[c] = s;
    total[C + c] = t;
    d_beta[c] = static_cast<float>(s);
    d_gamma[c] = static_cast<float>(t * save_invstd[c]);
  }
  total[2 * C] = static_cast<double>(rows);
  if (options.reducer) options.reducer->sum(total, 2 * C + 1);
  const double count = total[2 * C];
  // d_in = gamma*invstd * (dy - mean(dy) - (x-mean) * invstd^2 * mean(dy*(x-mean))), per channel
  // a = gamma*invstd, k = a*invstd^2*mean(dy*(x-mean)), b = -a*mean(dy). Reuse the scratch's
  // partials as floats.
  float* coef = reinterpret_cast<float*>(scratch);  // (3, C) floats
  for (int c = 0; c < C; ++c) {
    const double invstd = save_invstd[c];
    const double a = static_cast<double>(gamma[c]) * invstd;
    coef[c] = static_cast<float>(a);
    coef[C + c] = static_cast<float>(a * invstd * invstd * total[C + c] / count);
    coef[2 * C + c] = static_cast<float>(-a * total[c] / count);
  }
  const float* ca = coef;
  const float* ck = coef + C;
  const float* cb = coef + 2 * C;
  uint16_t* d_in_bf16 = options.d_in_bf16;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    if (r1 > r0) {
      with_operand(d_in, d_in_bf16, r0 * C, [&](auto* dx) {
        with_operand(in, x_bf16, r0 * C, [&](const auto* x) {
          with_operand(y_fp32, y_bf16, r0 * C, [&](const auto* y) {
            backward_apply_rows(dx, d_out + r0 * C, x, y, save_mean, ca, ck, cb, r1 - r0, C);
          });
        });
      });
    }
  }
}

void add_relu_backward_with_norm_sums(float* d_sum, const float* out, const uint16_t* out_bf16,
                                      int64_t rows, int C, const NormSumsRequest* norms,
                                      int norm_count) {
  NOSTRUM_CHECK(norm_count >= 1 && norm_count <= 2, ShapeError,
                "the add + ReLU backward sums for one or two batch norms",
                std::to_string(norm_count) + " asked");
  AddReluBackward(d_sum, out, out_bf16, rows, C, norms, norm_count).finish(nullptr, 0, rows);
}

AddReluBackward::AddReluBackward(float* d_sum, const float* out, const uint16_t* out_bf16,
                                 int64_t rows, int C, const NormSumsRequest* norms, int norm_count)
    : d_sum_(d_sum),
      out_(out),
      out_bf16_(out_bf16),
      rows_(rows),
      C_(C),
      norms_(norms),
      norm_count_(norm_count) {
  NOSTRUM_CHECK(norm_count >= 0 && norm_count <= 2, ShapeError,
                "the add + ReLU backward sums for at most two batch norms",
                std::to_string(norm_count) + " asked");
}

void AddReluBackward::finish(const float* add, int64_t r0, int64_t r1) {
  NOSTRUM_CHECK(r0 == done_ && r1 > r0 && r1 <= rows_, ShapeError,
                "the add + ReLU backward finishes rows in order",
                "rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") after " +
                    std::to_string(done_) + " of " + std::to_string(rows_));
  const int C = C_;
  if (norm_count_ == 0) {  // no sums: the mask alone, the pool's threads each a share of the rows
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t a = r0 + (r1 - r0) * t / nt, b = r0 + (r1 - r0) * (t + 1) / nt;
      if (b > a)
        with_operand(out_, out_bf16_, a * C, [&](const auto* y) {
          add_mask_rows(d_sum_ + a * C, add ? add + (a - r0) * C : nullptr, y, b - a, C, C);
        });
    }
    done_ = r1;
    return;
  }
  const RowChunks chunks(rows_);
  // The row chunks this call touches, and channel slices (multiples of 16 channels) enough to
  // give every thread work where the chunks are fewer than the threads.
  const int64_t k0 = r0 / chunks.per, k1 = (r1 - 1) / chunks.per + 1;
  const int threads = omp_get_max_threads();
  const int lane_groups = std::max(1, C / 16);
  const int slices =
      int(std::clamp<int64_t>((threads + (k1 - k0) - 1) / (k1 - k0), 1, lane_groups));
  const int64_t items = (k1 - k0) * slices;
  // A chunk is rows [begin, end): its sums take 16-row blocks from begin, so a block that this
  // call ends inside is summed by the next call (its rows are masked now).
  const auto block_floor = [](int64_t begin, int64_t r) {
    return begin + (r - begin) / kBlockRows * kBlockRows;
  };
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t k = k0 + item / slices;
    const int slice = int(item % slices);
    const int c0 = int(int64_t(lane_groups) * slice / slices) * 16;
    const int c1 = slice + 1 == slices ? C : int(int64_t(lane_groups) * (slice + 1) / slices) * 16;
    const int width = c1 - c0;
    const int64_t begin = chunks.begin(k), end = chunks.end(k);
    const int64_t new_lo = std::max(r0, begin), new_hi = std::min(r1, end);
    const int64_t sum_lo = r0 <= begin ? begin : block_floor(begin, r0);
    const int64_t sum_hi = r1 >= end ? end : block_floor(begin, r1);
    if (r0 <= begin)
      for (int i = 0; i < norm_count_; ++i)
        for (int c = c0; c < c1; ++c)
          norms_[i].sums[k * C + c] = norms_[i].sums[(kChunks + k) * C + c] = 0.0;
    // Rows [from, to) masked (with their partial added), sums not yet taken.
    const auto mask_rows = [&](int64_t from, int64_t to) {
      if (to <= from) return;
      with_operand(out_, out_bf16_, from * C + c0, [&](const auto* y) {
        add_mask_rows(d_sum_ + from * C + c0, add ? add + (from - r0) * C + c0 : nullptr, y,
                      to - from, C, width);
      });
    };
    // The sums of masked rows [from, to) for norm i.
    const auto sum_masked = [&](int i, int64_t from, int64_t to) {
      const NormSumsRequest& q = norms_[i];
      with_operand(q.in, q.in_bf16, from * C + c0, [&](const auto* x) {
        backward_sum_rows(q.sums + k * C + c0, q.sums + (kChunks + k) * C + c0,
                          d_sum_ + from * C + c0, x, static_cast<const float*>(nullptr),
                          q.save_mean + c0, to - from, C, width);
      });
    };
    int64_t row = new_lo;
    if (sum_lo < new_lo) {
      // A block an earlier call ended inside: its new rows masked, then the block summed if whole.
      const int64_t block_end = std::min(sum_lo + kBlockRows, end);
      row = std::min(new_hi, block_end);
      mask_rows(new_lo, row);
      if (row == block_end)
        for (int i = 0; i < norm_count_; ++i) sum_masked(i, sum_lo, row);
    }
    const int64_t tail = std::max(row, sum_hi);
    // Whole blocks: add, mask and the norms' sums in one pass.
    if (row < sum_hi) {
      const int64_t n = sum_hi - row;
      const NormSumsRequest& first = norms_[0];
      const float* piece_add = add ? add + (row - r0) * C + c0 : nullptr;
      with_operand(first.in, first.in_bf16, row * C + c0, [&](const auto* x) {
        with_operand(out_, out_bf16_, row * C + c0, [&](const auto* y) {
          if (norm_count_ == 1) {
            mask_sum_rows(first.sums + k * C + c0, first.sums + (kChunks + k) * C + c0,
                          d_sum_ + row * C + c0, piece_add, x, y, first.save_mean + c0, n, C,
                          width);
            return;
          }
          const NormSumsRequest& second = norms_[1];
          with_operand(second.in, second.in_bf16, row * C + c0, [&](const auto* x2) {
            mask_sum2_rows(first.sums + k * C + c0, first.sums + (kChunks + k) * C + c0,
                           second.sums + k * C + c0, second.sums + (kChunks + k) * C + c0,
                           d_sum_ + row * C + c0, piece_add, x, x2, y, first.save_mean + c0,
                           second.save_mean + c0, n, C, width);
          });
        });
      });
    }
    // The start of a block this call ends inside: masked now, summed by the next call.
    mask_rows(tail, new_hi);
  }
  done_ = r1;
  if (r1 == rows_)  // chunks past the last row (fewer rows than chunks x per): zero sums
    for (int64_t k = chunks.count; k-- > 0 && chunks.begin(k) >= chunks.end(k);)
      for (int i = 0; i < norm_count_; ++i)
        for (int c = 0; c < C; ++c)
          norms_[i].sums[k * C + c] = norms_[i].sums[(kChunks + k) * C + c] = 0.0;
}

}  // namespace nostrum::layers
