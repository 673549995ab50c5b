// AVX-512F loops of nostrum's fp32 weight-gradient GEMM (see fp32_gemm_avx512.hpp): an MR x 32
// register tile of fp32 accumulators (MR <= 14: 28 accumulators, past vfmadd231ps's latency x
// throughput) fed per k by two loads of packed B and MR broadcasts of A, read where A is (a row
// of A holds the tile's MR values side by side). Compiled with -mavx512f -mfma; only
// <immintrin.h> is included.
#include "fp32_gemm_avx512.hpp"

#include <immintrin.h>

namespace nostrum::kernels::fp32_avx512 {

namespace {

constexpr int kTileRows = 14;
static_assert(kBlockRows % kTileRows == 0, "whole tiles");

inline __mmask16 first_lanes(int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

template <int MR>
__attribute__((noinline)) void tile(float* C, int64_t ldc, const float* a, int64_t lda,
                                    const float* b, int n, int k, float beta, bool first) {
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int m = 0; m < MR; ++m) acc[m][0] = _mm512_setzero_ps(), acc[m][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int kk = 0; kk < k; ++kk, a += lda, b += kStrip) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 14
    for (int m = 0; m < MR; ++m) {
      const __m512 av = _mm512_set1_ps(a[m]);
      acc[m][0] = _mm512_fmadd_ps(av, b0, acc[m][0]);
      acc[m][1] = _mm512_fmadd_ps(av, b1, acc[m][1]);
    }
  }
  const __mmask16 k0 = first_lanes(n), k1 = first_lanes(n - 16);
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 14
  for (int m = 0; m < MR; ++m) {
    float* c = C + m * ldc;
    __m512 v0 = acc[m][0], v1 = acc[m][1];
    if (!first) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, c), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, c + 16), v1);
    } else if (beta != 0.0f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k0, c), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k1, c + 16), v1);
    }
    _mm512_mask_storeu_ps(c, k0, v0);
    _mm512_mask_storeu_ps(c + 16, k1, v1);
  }
}

#define NOSTRUM_FP32_TILE(r)                       \
  case r:                                          \
    tile<r>(C, ldc, a, lda, b, n, k, beta, first); \
    break;

void tile_rows(int mr, float* C, int64_t ldc, const float* a, int64_t lda, const float* b, int n,
               int k, float beta, bool first) {
  // clang-format off
  switch (mr) {
    default: break;
    NOSTRUM_FP32_TILE(1) NOSTRUM_FP32_TILE(2) NOSTRUM_FP32_TILE(3) NOSTRUM_FP32_TILE(4)
    NOSTRUM_FP32_TILE(5) NOSTRUM_FP32_TILE(6) NOSTRUM_FP32_TILE(7) NOSTRUM_FP32_TILE(8)
    NOSTRUM_FP32_TILE(9) NOSTRUM_FP32_TILE(10) NOSTRUM_FP32_TILE(11) NOSTRUM_FP32_TILE(12)
    NOSTRUM_FP32_TILE(13) NOSTRUM_FP32_TILE(14)
  }
  // clang-format on
}
#undef NOSTRUM_FP32_TILE

}  // namespace

void pack_b(float* dst, const float* B, int64_t ldb, int k, int n, int s0, int s1) {
  for (int kk = 0; kk < k; ++kk) {
    const float* row = B + kk * ldb;
    for (int s = s0; s < s1; ++s) {
      float* d = dst + int64_t(s) * k * kStrip + int64_t(kk) * kStrip;
      const int j0 = s * kStrip;
      _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(first_lanes(n - j0), row + j0));
      _mm512_storeu_ps(d + 16, _mm512_maskz_loadu_ps(first_lanes(n - j0 - 16), row + j0 + 16));
    }
  }
}

void block(float* C, int64_t ldc, const float* a, int64_t lda, const float* b,
           int64_t b_strip_floats, int rows, int n, int k, float beta, bool first) {
  // As few tiles as 14 rows allow, their heights alike (each C value's sum is the same whatever
  // tile it falls in).
  const int tiles = (rows + kTileRows - 1) / kTileRows;
  for (int j = 0; j < n; j += kStrip) {
    const float* bs = b + int64_t(j / kStrip) * b_strip_floats;
    for (int t = 0, i = 0; t < tiles; ++t) {
      const int mr = (rows - i + (tiles - t) - 1) / (tiles - t);
      tile_rows(mr, C + int64_t(i) * ldc + j, ldc, a + i, lda, bs, n - j, k, beta, first);
      i += mr;
    }
  }
}

}  // namespace nostrum::kernels::fp32_avx512
