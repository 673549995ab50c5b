// AVX512_BF16 loops of the mixed-precision GEMM (see bf16_avx512.hpp): fp32 -> bf16 word packing
// (integer round-to-nearest-even, so denormals round like the scalar reference instead of being
// flushed as vcvtne2ps2bf16 does) and an MR x 16*NB register tile of fp32 accumulators fed by
// vdpbf16ps: per k-pair, NB loads of 16 B words and one broadcast A word per row. Compiled with
// -mavx512f -mavx512bw -mavx512bf16; only <immintrin.h> is included.
#include "bf16_avx512.hpp"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as merge sources and warn about it
// (GCC bug 105593, fixed in GCC 13): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace nostrum::kernels::bf16_avx512 {

namespace {

// Upper 16 bits of the result = fp32_to_bf16 of each lane (see nostrum/kernels/bf16.hpp).
inline __m512i round_bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

// 32 bf16 (16 words) from the upper halves of lo (elements 0-15) and hi (16-31).
inline __m512i upper_halves(__m512i lo, __m512i hi) {
  const __m512i odd =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(lo, odd, hi);
}

inline __mmask16 first(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n > 0 ? n : 0)) - 1);
}

// Words of two rows a (low halves) and b (high halves).
inline __m512i pair_words(__m512 a, __m512 b) {
  return _mm512_or_si512(_mm512_srli_epi32(round_bits(a), 16),
                         _mm512_and_si512(round_bits(b), _mm512_set1_epi32(int(0xffff0000u))));
}

constexpr int kMaxRows = 14;  // NB = 2: 28 accumulators + 2 B vectors + 1 broadcast < 32 zmm

// One MR x 16*NB tile; ROWS: A row-major words (A.pair == 1), else pair-major (A.row == 1).
template <int MR, int NB, bool ROWS>
__attribute__((noinline)) void tile(float* C, int64_t ldc, WordsA A, const uint32_t* B, int64_t ldb,
                                    int n_valid, int pairs, float alpha, float beta,
                                    bool overwrite) {
  __m512 acc[MR][NB];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_setzero_ps();
  const uint32_t* a = A.a;
  const int64_t step = ROWS ? 1 : A.pair, row = ROWS ? A.row : 1;
  for (int p = 0; p < pairs; ++p, a += step, B += ldb) {
    __m512bh bv[NB];
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) bv[b] = (__m512bh)_mm512_loadu_si512(B + 16 * b);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[m * row]));
#pragma GCC unroll 2
      for (int b = 0; b < NB; ++b) acc[m][b] = _mm512_dpbf16_ps(acc[m][b], av, bv[b]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) {
      const __mmask16 k = first(n_valid - 16 * b);
      float* c = C + m * ldc + 16 * b;
      __m512 v = _mm512_mul_ps(va, acc[m][b]);
      if (!overwrite)
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c), v);
      else if (beta != 0.0f)
        v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k, c), v);
      _mm512_mask_storeu_ps(c, k, v);
    }
}

template <int NB, bool ROWS>
void tile_rows(int mr, float* C, int64_t ldc, WordsA A, const uint32_t* B, int64_t ldb, int n_valid,
               int pairs, float alpha, float beta, bool overwrite) {
  switch (mr) {
    default:
      break;
      // clang-format off
#define NOSTRUM_TILE(r)                                                           \
  case r:                                                                         \
    tile<r, NB, ROWS>(C, ldc, A, B, ldb, n_valid, pairs, alpha, beta, overwrite); \
    break;
    NOSTRUM_TILE(1) NOSTRUM_TILE(2) NOSTRUM_TILE(3) NOSTRUM_TILE(4) NOSTRUM_TILE(5)
    NOSTRUM_TILE(6) NOSTRUM_TILE(7) NOSTRUM_TILE(8) NOSTRUM_TILE(9) NOSTRUM_TILE(10)
    NOSTRUM_TILE(11) NOSTRUM_TILE(12) NOSTRUM_TILE(13) NOSTRUM_TILE(14)
#undef NOSTRUM_TILE
      // clang-format on
  }
}

template <bool ROWS>
void block(float* C, int64_t ldc, WordsA A, const uint32_t* B, int64_t ldb, int M, int N, int pairs,
           float alpha, float beta, bool overwrite) {
  for (int j = 0; j < N; j += 32) {
    const int n = N - j < 32 ? N - j : 32;
    for (int i = 0; i < M; i += kMaxRows) {
      const int mr = M - i < kMaxRows ? M - i : kMaxRows;
      WordsA a = A;
      a.a += i * A.row;
      if (n > 16)
        tile_rows<2, ROWS>(mr, C + int64_t(i) * ldc + j, ldc, a, B + j, ldb, n, pairs, alpha, beta,
                           overwrite);
      else
        tile_rows<1, ROWS>(mr, C + int64_t(i) * ldc + j, ldc, a, B + j, ldb, n, pairs, alpha, beta,
                           overwrite);
    }
  }
}

}  // namespace

void convert(uint16_t* dst, const float* src, int64_t count) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32)
    _mm512_storeu_si512(dst + i, upper_halves(round_bits(_mm512_loadu_ps(src + i)),
                                              round_bits(_mm512_loadu_ps(src + i + 16))));
  if (i < count) {
    const int64_t n = count - i;
    const __m512i w = upper_halves(round_bits(_mm512_maskz_loadu_ps(first(n), src + i)),
                                   round_bits(_mm512_maskz_loadu_ps(first(n - 16), src + i + 16)));
    _mm512_mask_storeu_epi16(dst + i, n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1), w);
  }
}

void rows_to_words(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                   int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    uint32_t* d = dst + r * ld_words;
    for (int64_t p = 0; p < ld_words; p += 16) {
      const int64_t n = cols - 2 * p;  // floats left in the row
      const __m512i w =
          upper_halves(round_bits(_mm512_maskz_loadu_ps(first(n), s + 2 * p)),
                       round_bits(_mm512_maskz_loadu_ps(first(n - 16), s + 2 * p + 16)));
      _mm512_mask_storeu_epi32(d + p, first(ld_words - p), w);
    }
  }
}

void interleave_rows(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                     int cols) {
  for (int r = 0; r < rows; r += 2) {
    const float* a = src + r * lds;
    const float* b = a + lds;
    const bool has_b = r + 1 < rows;
    uint32_t* d = dst + (r / 2) * ld_words;
    for (int64_t c = 0; c < ld_words; c += 16) {
      const __mmask16 k = first(cols - c);
      const __m512 va = _mm512_maskz_loadu_ps(k, a + c);
      const __m512 vb = has_b ? _mm512_maskz_loadu_ps(k, b + c) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(d + c, first(ld_words - c), pair_words(va, vb));
    }
  }
}

void interleave_columns(uint32_t* dst, int64_t ld_words, int width, const float* src, int64_t lds,
                        int rows, int cols) {
  const __m512i lanes =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(int(lds)));
  const int pairs = (cols + 1) / 2;
  for (int c = 0; c < width; c += 16) {
    const __mmask16 k = first(rows - c);
    const float* base = src + int64_t(c) * lds;
    for (int p = 0; p < pairs; ++p) {
      const __m512 va = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, lanes, base + 2 * p, 4);
      const __m512 vb = 2 * p + 1 < cols ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, lanes,
                                                                    base + 2 * p + 1, 4)
                                         : _mm512_setzero_ps();
      _mm512_storeu_si512(dst + int64_t(p) * ld_words + c, pair_words(va, vb));
    }
  }
}

void gemm_block(float* C, int64_t ldc, WordsA A, const uint32_t* B, int64_t ldb, int M, int N,
                int pairs, float alpha, float beta, bool overwrite) {
  if (A.pair == 1)
    block<true>(C, ldc, A, B, ldb, M, N, pairs, alpha, beta, overwrite);
  else
    block<false>(C, ldc, A, B, ldb, M, N, pairs, alpha, beta, overwrite);
}

float dot_probe(int64_t iterations) {
  constexpr int kChains = 24;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // (1.0, 1.0)
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x3c003c00);  // (2^-7, 2^-7)
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

float fma_probe(int64_t iterations) {
  constexpr int kChains = 24;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0x1p-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace nostrum::kernels::bf16_avx512
