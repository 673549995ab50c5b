// The batch norm's elementwise row kernels written out in AVX-512 intrinsics (F, BW and FMA; x86
// only, included by batch_norm.cpp alone): the normalising pass, the backward's sums and its
// apply pass, the add + ReLU backward's masked sums. Each lane does the operations of the portable
// bodies in batch_norm.cpp in the same order (so the same bits, in every ISA copy), but the
// sums' float partials stay in zmm registers across a 16-row block, four 16-channel groups at a
// time (independent chains, hiding the FMA latency), and a bf16 operand is widened and rounded in
// the register. GCC's vectorisation of the portable bodies (256-bit operations, partials stored to
// the stack every row) ran 2-3x slower on data in cache: one thread of the Zen 5, 1568 x 256 bf16
// in L2, the normalising pass 101-121 us against 32-34 here, the backward's apply 108-113 against
// 47-56, the add + ReLU backward with one norm's sums 91-105 against 64-69.
#pragma once

#include <immintrin.h>

// GCC 12's AVX-512 conversion intrinsics pass an undefined vector as the merge source and warn
// about it under -Wmaybe-uninitialized (GCC bug 105593, fixed in GCC 13): a false positive (here
// for the rest of batch_norm.cpp too, which includes this file).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdint>

#include "kernels/bf16_avx512_lanes.hpp"

namespace nostrum::layers::bn_avx512 {

#define NOSTRUM_BN_AVX512 __attribute__((target("avx512f,avx512bw,fma")))
#define NOSTRUM_BN_AVX512_INLINE \
  inline __attribute__((target("avx512f,avx512bw,fma"), always_inline))

// Row blocks of the sums (batch_norm.cpp's kBlockRows) and channel groups a register block takes.
constexpr int64_t kBlockRows = 16;
constexpr int kGroups = 4;

NOSTRUM_BN_AVX512_INLINE __mmask16 lanes(int n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u);
}
// Loads and stores of 16 lanes, or of the lanes of k where masked: masked accesses only for a
// row's last, partial vector (masked ones on every vector, the normalising pass above took 49 us).
template <bool kMasked>
NOSTRUM_BN_AVX512_INLINE __m512 load(const float* p, __mmask16 k) {
  return kMasked ? _mm512_maskz_loadu_ps(k, p) : _mm512_loadu_ps(p);
}
// bf16 widened exactly (kernels::bf16_to_fp32).
template <bool kMasked>
NOSTRUM_BN_AVX512_INLINE __m512 load(const uint16_t* p, __mmask16 k) {
  return kernels::bf16_lanes::widen(
      kMasked ? _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(__mmask32(k), p))
              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <bool kMasked>
NOSTRUM_BN_AVX512_INLINE void store(float* p, __mmask16 k, __m512 v) {
  if constexpr (kMasked)
    _mm512_mask_storeu_ps(p, k, v);
  else
    _mm512_storeu_ps(p, v);
}
// Rounded to bf16 as kernels::fp32_to_bf16 rounds (to nearest even; a NaN made quiet).
template <bool kMasked>
NOSTRUM_BN_AVX512_INLINE void store(uint16_t* p, __mmask16 k, __m512 v) {
  const __m512i bits = _mm512_srli_epi32(kernels::bf16_lanes::round_bits(v), 16);
  const __m256i h = _mm512_cvtepi32_epi16(bits);
  if constexpr (kMasked)
    _mm512_mask_storeu_epi16(p, __mmask32(k), _mm512_castsi256_si512(h));
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}
// The streams' lines requested kPrefetch elements ahead: out of cache the hardware prefetchers
// alone left these kernels slower than the 256-bit compiled copies (one zmm access a line; a Zen 5,
// layer 1's 100352 x 64 backward apply 3.0 ms against 2.2, 1.4 ms with these).
constexpr int64_t kPrefetch = 512;
template <typename T>
NOSTRUM_BN_AVX512_INLINE void prefetch(const T* p, int64_t ahead = kPrefetch) {
  _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
}
// kernels::relu_grad: dy where y > 0, else +0.0 (also for a NaN y).
NOSTRUM_BN_AVX512_INLINE __m512 relu_grad(__m512 dy, __m512 y) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GT_OQ), dy);
}
// acc (the k lanes, double) += the float partial p, each lane converted exactly.
NOSTRUM_BN_AVX512_INLINE void add_to_doubles(double* acc, __mmask16 k, __m512 p) {
  const __mmask8 lo = __mmask8(k & 0xff), hi = __mmask8(k >> 8);
  const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(p));
  const __m512d b =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)));
  _mm512_mask_storeu_pd(acc, lo, _mm512_add_pd(_mm512_maskz_loadu_pd(lo, acc), a));
  if (hi) _mm512_mask_storeu_pd(acc + 8, hi, _mm512_add_pd(_mm512_maskz_loadu_pd(hi, acc + 8), b));
}

// normalize_rows_body: y = (x - mean) * scale + beta (+ z), then max(0, .) when kRelu; scale the
// slice's invstd * gamma (a float product, as the portable body forms it).
template <bool kMasked, bool kResidual, bool kRelu, typename Y, typename X, typename Z>
NOSTRUM_BN_AVX512_INLINE void normalize_vector(Y* y, const X* x, const Z* z, const float* mean,
                                               const float* scale, const float* beta, __mmask16 k) {
  prefetch(x);
  if constexpr (kResidual) prefetch(z);
  __m512 v = _mm512_fmadd_ps(_mm512_sub_ps(load<kMasked>(x, k), load<kMasked>(mean, k)),
                             load<kMasked>(scale, k), load<kMasked>(beta, k));
  if constexpr (kResidual) v = _mm512_add_ps(v, load<kMasked>(z, k));
  // std::max(v, 0.0f) is (v < 0 ? 0 : v): vmaxps(0, v) returns v unless 0 > v, NaN too.
  if constexpr (kRelu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  store<kMasked>(y, k, v);
}

template <bool kResidual, bool kRelu, typename Y, typename X, typename Z>
NOSTRUM_BN_AVX512_INLINE void normalize_slice(Y* y, const X* x, const Z* z, const float* mean,
                                              const float* scale, const float* beta, int64_t rows,
                                              int64_t stride, int n) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * stride;
    int c = 0;
    for (; c + 16 <= n; c += 16)
      normalize_vector<false, kResidual, kRelu>(y + o + c, x + o + c, z + o + c, mean + c,
                                                scale + c, beta + c, 0xffff);
    if (c < n)
      normalize_vector<true, kResidual, kRelu>(y + o + c, x + o + c, z + o + c, mean + c, scale + c,
                                               beta + c, lanes(n - c));
  }
}

template <typename Y, typename X, typename Z>
NOSTRUM_BN_AVX512 void normalize_rows(Y* __restrict y, const X* __restrict x, const Z* __restrict z,
                                      const float* __restrict mean, const float* __restrict invstd,
                                      const float* __restrict gamma, const float* __restrict beta,
                                      int64_t rows, int C, bool relu) {
  constexpr int kSlice = 4096;
  alignas(64) float scale[kSlice];
  for (int c0 = 0; c0 < C; c0 += kSlice) {
    const int n = std::min(kSlice, C - c0);
    for (int c = 0; c < n; ++c) scale[c] = invstd[c0 + c] * gamma[c0 + c];
    Y* ys = y + c0;
    const X* xs = x + c0;
    const float *m = mean + c0, *b = beta + c0;
    if (z) {
      const Z* zs = z + c0;
      if (relu)
        normalize_slice<true, true>(ys, xs, zs, m, scale, b, rows, C, n);
      else
        normalize_slice<true, false>(ys, xs, zs, m, scale, b, rows, C, n);
    } else {
      if (relu)
        normalize_slice<false, true>(ys, xs, z, m, scale, b, rows, C, n);
      else
        normalize_slice<false, false>(ys, xs, z, m, scale, b, rows, C, n);
    }
  }
}

// backward_apply_rows_body: dx = ca * g - ck * (x - mean) + cb, g = dy masked by y > 0 when y is
// given; an fp32 dx may alias dy (each vector is read before it is written).
template <bool kMasked, bool kMask, typename DX, typename X, typename Y>
NOSTRUM_BN_AVX512_INLINE void apply_vector(DX* dx, const float* dy, const X* x, const Y* y,
                                           const float* mean, const float* ca, const float* ck,
                                           const float* cb, __mmask16 k) {
  prefetch(dy);
  prefetch(x);
  if constexpr (kMask) prefetch(y);
  __m512 g = load<kMasked>(dy, k);
  if constexpr (kMask) g = relu_grad(g, load<kMasked>(y, k));
  const __m512 neg_ck = _mm512_castsi512_ps(_mm512_xor_si512(
      _mm512_castps_si512(load<kMasked>(ck, k)), _mm512_set1_epi32(int(0x80000000u))));
  const __m512 inner = _mm512_fmadd_ps(
      neg_ck, _mm512_sub_ps(load<kMasked>(x, k), load<kMasked>(mean, k)), load<kMasked>(cb, k));
  store<kMasked>(dx, k, _mm512_fmadd_ps(load<kMasked>(ca, k), g, inner));
}

template <bool kMask, typename DX, typename X, typename Y>
NOSTRUM_BN_AVX512_INLINE void apply_rows(DX* dx, const float* dy, const X* x, const Y* y,
                                         const float* mean, const float* ca, const float* ck,
                                         const float* cb, int64_t rows, int C) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * C;
    const Y* yr = kMask ? y + o : y;
    int c = 0;
    for (; c + 16 <= C; c += 16)
      apply_vector<false, kMask>(dx + o + c, dy + o + c, x + o + c, kMask ? yr + c : yr, mean + c,
                                 ca + c, ck + c, cb + c, 0xffff);
    if (c < C)
      apply_vector<true, kMask>(dx + o + c, dy + o + c, x + o + c, kMask ? yr + c : yr, mean + c,
                                ca + c, ck + c, cb + c, lanes(C - c));
  }
}

template <typename DX, typename X, typename Y>
NOSTRUM_BN_AVX512 void backward_apply_rows(DX* dx, const float* dy, const X* __restrict x,
                                           const Y* __restrict y, const float* __restrict mean,
                                           const float* __restrict ca, const float* __restrict ck,
                                           const float* __restrict cb, int64_t rows, int C) {
  if (y)
    apply_rows<true>(dx, dy, x, y, mean, ca, ck, cb, rows, C);
  else
    apply_rows<false>(dx, dy, x, y, mean, ca, ck, cb, rows, C);
}

// One row of one 16-channel group of block_sums (below), at offset o: g = dy (+ add when kAdd),
// masked by y > 0 when kMask and then stored over dy when kStore; pa += g, pb1 += g * (x1 - m1)
// and, for a second norm, pb2 += g * (x2 - m2).
template <bool kMasked, bool kStore, bool kAdd, bool kMask, int kNorms, typename D, typename X1,
          typename X2, typename Y>
NOSTRUM_BN_AVX512_INLINE void group_row(__m512& pa, __m512& pb1, __m512& pb2, __m512 m1, __m512 m2,
                                        D* dy, const float* add, const X1* x1, const X2* x2,
                                        const Y* y, int64_t o, int64_t ahead, __mmask16 k) {
  // The same lines of the next 16-row block (the rows are walked a register block at a time).
  prefetch(dy + o, ahead);
  prefetch(x1 + o, ahead);
  if constexpr (kAdd) prefetch(add + o, ahead);
  if constexpr (kMask) prefetch(y + o, ahead);
  if constexpr (kNorms == 2) prefetch(x2 + o, ahead);
  __m512 g = load<kMasked>(dy + o, k);
  if constexpr (kAdd) g = _mm512_add_ps(g, load<kMasked>(add + o, k));
  if constexpr (kMask) g = relu_grad(g, load<kMasked>(y + o, k));
  if constexpr (kStore) store<kMasked>(dy + o, k, g);
  pa = _mm512_add_ps(pa, g);
  pb1 = _mm512_fmadd_ps(g, _mm512_sub_ps(load<kMasked>(x1 + o, k), m1), pb1);
  if constexpr (kNorms == 2)
    pb2 = _mm512_fmadd_ps(g, _mm512_sub_ps(load<kMasked>(x2 + o, k), m2), pb2);
}

// The gradient sums of gradient_sums and mask_sum2_rows in batch_norm.cpp, for kGroupsHere
// 16-channel groups from c0 (the last one `last` lanes wide, kLastMasked when that is fewer than
// 16) over the rn rows of one 16-row block: per norm i < kNorms, a_i += sum of g and b_i += sum of
// g * (x_i - mean_i), through float partials in registers (both norms' sums of g are the same
// sums, taken once).
template <bool kStore, bool kAdd, bool kMask, int kNorms, int kGroupsHere, bool kLastMasked,
          typename D, typename X1, typename X2, typename Y>
NOSTRUM_BN_AVX512_INLINE void block_sums(double* a1, double* b1, double* a2, double* b2, D* dy,
                                         const float* add, const X1* x1, const X2* x2, const Y* y,
                                         const float* mean1, const float* mean2, int64_t rn,
                                         int64_t stride, int c0, __mmask16 last) {
  constexpr int G = kGroupsHere;
  __m512 pa[G], pb1[G], pb2[G], m1[G], m2[G];
  for (int j = 0; j < G; ++j) {
    const __mmask16 k = j + 1 == G ? last : __mmask16(0xffff);
    pa[j] = pb1[j] = pb2[j] = _mm512_setzero_ps();
    m1[j] = load<true>(mean1 + c0 + 16 * j, k);
    m2[j] = kNorms == 2 ? load<true>(mean2 + c0 + 16 * j, k) : m1[j];
  }
  const int64_t ahead = kBlockRows * stride;
  for (int64_t r = 0; r < rn; ++r) {
    const int64_t o = r * stride + c0;
    for (int j = 0; j + 1 < G; ++j)
      group_row<false, kStore, kAdd, kMask, kNorms>(pa[j], pb1[j], pb2[j], m1[j], m2[j], dy, add,
                                                    x1, x2, y, o + 16 * j, ahead, 0xffff);
    group_row<kLastMasked, kStore, kAdd, kMask, kNorms>(pa[G - 1], pb1[G - 1], pb2[G - 1],
                                                        m1[G - 1], m2[G - 1], dy, add, x1, x2, y,
                                                        o + 16 * (G - 1), ahead, last);
  }
  for (int j = 0; j < G; ++j) {
    const __mmask16 k = j + 1 == G ? last : __mmask16(0xffff);
    add_to_doubles(a1 + c0 + 16 * j, k, pa[j]);
    add_to_doubles(b1 + c0 + 16 * j, k, pb1[j]);
    if constexpr (kNorms == 2) {
      add_to_doubles(a2 + c0 + 16 * j, k, pa[j]);
      add_to_doubles(b2 + c0 + 16 * j, k, pb2[j]);
    }
  }
}

// Rows of `stride` floats, the first `width` channels of each, in 16-row blocks from the first; dy
// is const float when the mask is not stored (kStore false).
template <bool kStore, bool kAdd, bool kMask, int kNorms, typename D, typename X1, typename X2,
          typename Y>
NOSTRUM_BN_AVX512_INLINE void rows_sums(double* a1, double* b1, double* a2, double* b2, D* dy,
                                        const float* add, const X1* x1, const X2* x2, const Y* y,
                                        const float* mean1, const float* mean2, int64_t rows,
                                        int64_t stride, int width) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int64_t rn = std::min(kBlockRows, rows - r0);
    const int64_t at = r0 * stride;
    D* d = dy + at;
    const float* ad = kAdd ? add + at : add;
    const X1* p1 = x1 + at;
    const X2* p2 = kNorms == 2 ? x2 + at : x2;
    const Y* py = kMask ? y + at : y;
    for (int c0 = 0; c0 < width; c0 += 16 * kGroups) {
      const int left = width - c0;
      const int groups = std::min(kGroups, (left + 15) / 16);
      const __mmask16 last = lanes(left - 16 * (groups - 1));
#define NOSTRUM_BN_BLOCK(G)                                                                     \
  if (last == 0xffff)                                                                           \
    block_sums<kStore, kAdd, kMask, kNorms, G, false>(a1, b1, a2, b2, d, ad, p1, p2, py, mean1, \
                                                      mean2, rn, stride, c0, last);             \
  else                                                                                          \
    block_sums<kStore, kAdd, kMask, kNorms, G, true>(a1, b1, a2, b2, d, ad, p1, p2, py, mean1,  \
                                                     mean2, rn, stride, c0, last)
      switch (groups) {
        case 4:
          NOSTRUM_BN_BLOCK(4);
          break;
        case 3:
          NOSTRUM_BN_BLOCK(3);
          break;
        case 2:
          NOSTRUM_BN_BLOCK(2);
          break;
        default:
          NOSTRUM_BN_BLOCK(1);
          break;
      }
#undef NOSTRUM_BN_BLOCK
    }
  }
}

// backward_sum_rows: a, b += the sums of dy (masked by y > 0 where y is given) against x, mean.
template <typename X, typename Y>
NOSTRUM_BN_AVX512 void backward_sum_rows(double* __restrict a, double* __restrict b,
                                         const float* __restrict dy, const X* __restrict x,
                                         const Y* __restrict y, const float* __restrict mean,
                                         int64_t rows, int64_t stride, int width) {
  if (y)
    rows_sums<false, false, true, 1>(a, b, a, b, dy, nullptr, x, x, y, mean, mean, rows, stride,
                                     width);
  else
    rows_sums<false, false, false, 1>(a, b, a, b, dy, nullptr, x, x, y, mean, mean, rows, stride,
                                      width);
}

// mask_sum_rows: dy = (dy + add, where add is given) masked by y > 0, stored; a, b += its sums.
template <typename X, typename Y>
NOSTRUM_BN_AVX512 void mask_sum_rows(double* __restrict a, double* __restrict b,
                                     float* __restrict dy, const float* __restrict add,
                                     const X* __restrict x, const Y* __restrict y,
                                     const float* __restrict mean, int64_t rows, int64_t stride,
                                     int width) {
  if (add)
    rows_sums<true, true, true, 1>(a, b, a, b, dy, add, x, x, y, mean, mean, rows, stride, width);
  else
    rows_sums<true, false, true, 1>(a, b, a, b, dy, add, x, x, y, mean, mean, rows, stride, width);
}

// mask_sum2_rows: mask_sum_rows with the sums of two norms.
template <typename X1, typename X2, typename Y>
NOSTRUM_BN_AVX512 void mask_sum2_rows(double* __restrict a1, double* __restrict b1,
                                      double* __restrict a2, double* __restrict b2,
                                      float* __restrict dy, const float* __restrict add,
                                      const X1* __restrict x1, const X2* __restrict x2,
                                      const Y* __restrict y, const float* __restrict mean1,
                                      const float* __restrict mean2, int64_t rows, int64_t stride,
                                      int width) {
  if (add)
    rows_sums<true, true, true, 2>(a1, b1, a2, b2, dy, add, x1, x2, y, mean1, mean2, rows, stride,
                                   width);
  else
    rows_sums<true, false, true, 2>(a1, b1, a2, b2, dy, add, x1, x2, y, mean1, mean2, rows, stride,
                                    width);
}

}  // namespace nostrum::layers::bn_avx512
