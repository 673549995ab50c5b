// AVX512_BF16 loops of the mixed-precision GEMM (see bf16_avx512.hpp): fp32 -> bf16 word packing
// (integer round-to-nearest-even, so denormals round like the scalar reference instead of being
// flushed as vcvtne2ps2bf16 does) and an MR x 16*NB register tile of fp32 accumulators fed by
// vdpbf16ps: per k-pair, NB loads of 16 B words and one broadcast A word per row. Compiled with
// -mavx512f -mavx512bw -mavx512bf16; only <immintrin.h> is included.
#include "bf16_avx512.hpp"

#include <immintrin.h>

#include "bf16_avx512_lanes.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as merge sources and warn about it
// (GCC bug 105593, fixed in GCC 13): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace nostrum::kernels::bf16_avx512 {

namespace {

using bf16_lanes::round_bits;

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

// One MR x 16*NB register tile of fp32 accumulators: per k-pair NB loads of 16 B words (the
// strip's next 64*NB bytes) and MR broadcasts of A words at immediate offsets from one pointer;
// nothing converted or permuted in the loop. NB = 2 up to 14 rows (28 accumulators), NB = 1 up to
// 24: well past vdpbf16ps's latency x throughput (6 on Zen 4) either way. Meanwhile up to
// `lines` lines of `next` are prefetched, one or two per k-pair, and `next` advanced past them.
template <int MR, int NB, bool PAIR_MAJOR>
__attribute__((noinline)) void tile(float* C, int64_t ldc, const uint32_t* a, const uint32_t* b,
                                    int n_valid, int pairs, float alpha, float beta, bool overwrite,
                                    Prefetch& next, int lines) {
  constexpr int64_t kRow = PAIR_MAJOR ? 1 : kBlockPairs, kPair = PAIR_MAJOR ? kBlockRows : 1;
  const char* pf_row = next.base;
  int pf_byte = next.byte, pf_rows = next.rows;
  const int64_t left = next.lines_left();
  int pf_left = int(lines < left ? lines : left);
  const int pf_each = pf_left > pairs ? 2 : 1;
  const auto prefetch = [&] {
    for (int q = 0; q < pf_each; ++q)
      if (pf_left > 0) {
        _mm_prefetch(pf_row + pf_byte, _MM_HINT_T0);
        --pf_left;
        pf_byte += 64;
        if (pf_byte >= next.row_bytes) pf_byte = 0, pf_row += next.stride, --pf_rows;
      }
  };
  __m512 acc[MR][NB];
#pragma GCC unroll 24
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int n = 0; n < NB; ++n) acc[m][n] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int p = 0; p < pairs; ++p, a += kPair, b += 16 * NB) {
    prefetch();
    __m512bh bv[NB];
#pragma GCC unroll 2
    for (int n = 0; n < NB; ++n) bv[n] = (__m512bh)_mm512_loadu_si512(b + 16 * n);
#pragma GCC unroll 24
    for (int m = 0; m < MR; ++m) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[m * kRow]));
#pragma GCC unroll 2
      for (int n = 0; n < NB; ++n) acc[m][n] = _mm512_dpbf16_ps(acc[m][n], av, bv[n]);
    }
  }
  next.base = pf_row, next.byte = pf_byte, next.rows = pf_rows;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 24
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 2
    for (int n = 0; n < NB; ++n) {
      const __mmask16 k = first(n_valid - 16 * n);
      float* c = C + m * ldc + 16 * n;
      __m512 v = _mm512_mul_ps(va, acc[m][n]);
      if (!overwrite)
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c), v);
      else if (beta != 0.0f)
        v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k, c), v);
      _mm512_mask_storeu_ps(c, k, v);
    }
}

// ---- operands as words: fp32 values rounded, bf16 values taken as they are ----

// 16 words of one row's consecutive pairs from s, n values left in the row (zero past them).
inline __m512i row_words(const float* s, int64_t n) {
  return upper_halves(round_bits(_mm512_maskz_loadu_ps(first(n), s)),
                      round_bits(_mm512_maskz_loadu_ps(first(n - 16), s + 16)));
}
inline __m512i row_words(const uint16_t* s, int64_t n) {
  return _mm512_maskz_loadu_epi16(n >= 32 ? ~__mmask32(0) : __mmask32((1u << (n > 0 ? n : 0)) - 1),
                                  s);
}

// 16 words pairing columns of row a (low halves) and row b (high halves; 0 when b is null), the
// columns masked by k.
inline __m512i column_words(const float* a, const float* b, __mmask16 k) {
  return pair_words(_mm512_maskz_loadu_ps(k, a),
                    b ? _mm512_maskz_loadu_ps(k, b) : _mm512_setzero_ps());
}
inline __m512i column_words(const uint16_t* a, const uint16_t* b, __mmask16 k) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, a));
  if (!b) return lo;
  return _mm512_or_si512(
      lo, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, b)), 16));
}

// 32 words pairing 32 columns of bf16 rows a (low halves) and b (high halves), in two registers
// (columns 0-15, 16-31): one load of each row, one two-source permute for each half.
inline void column_words32(const uint16_t* a, const uint16_t* b, __m512i& lo, __m512i& hi) {
  // Half-word 2i of lo is a[i], 2i + 1 is b[i] (index bit 5 picks b); hi the same from column 16.
  const __m512i lo_index =
      _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi_index = _mm512_add_epi16(lo_index, _mm512_set1_epi16(16));
  const __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
  lo = _mm512_permutex2var_epi16(va, lo_index, vb);
  hi = _mm512_permutex2var_epi16(va, hi_index, vb);
}
inline void column_words32(const float* a, const float* b, __m512i& lo, __m512i& hi) {
  lo = column_words(a, b, 0xffff);
  hi = column_words(a + 16, b + 16, 0xffff);
}

// r[i] word q -> r[q] word i, for 16 registers of 16 words: 32-bit then 64-bit interleaves
// within 128-bit lanes, then two rounds of lane shuffles.
inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);      // lane L: r_i[4L], r_i+1[4L], [4L+1], [4L+1]
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);  // ... [4L+2], [4L+3]
  }
  // u[4g + m], lane L: rows 4g..4g+3, word 4L + m.
  for (int g = 0; g < 4; ++g) {
    const __m512i* a = t + 4 * g;
    u[4 * g + 0] = _mm512_unpacklo_epi64(a[0], a[2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(a[0], a[2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(a[1], a[3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(a[1], a[3]);
  }
  for (int m = 0; m < 4; ++m) {
    // [g0.l0, g0.l2, g1.l0, g1.l2], [g0.l1, g0.l3, g1.l1, g1.l3], and the same for groups 2, 3.
    const __m512i w0 = _mm512_shuffle_i32x4(u[m], u[4 + m], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i w1 = _mm512_shuffle_i32x4(u[m], u[4 + m], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i w2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i w3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(3, 1, 3, 1));
    r[m] = _mm512_shuffle_i32x4(w0, w2, _MM_SHUFFLE(2, 0, 2, 0));       // lane 0 of each group
    r[8 + m] = _mm512_shuffle_i32x4(w0, w2, _MM_SHUFFLE(3, 1, 3, 1));   // lane 2
    r[4 + m] = _mm512_shuffle_i32x4(w1, w3, _MM_SHUFFLE(2, 0, 2, 0));   // lane 1
    r[12 + m] = _mm512_shuffle_i32x4(w1, w3, _MM_SHUFFLE(3, 1, 3, 1));  // lane 3
  }
}

template <class T>
void rows_to_words_of(uint32_t* dst, int64_t ld_words, const T* src, int64_t lds, int rows,
                      int cols) {
  const int64_t words = (cols + 1) / 2 < ld_words ? (cols + 1) / 2 : ld_words;
  for (int r = 0; r < rows; ++r) {
    const T* s = src + r * lds;
    uint32_t* d = dst + r * ld_words;
    for (int64_t p = 0; p < words; p += 16)
      _mm512_mask_storeu_epi32(d + p, first(ld_words - p), row_words(s + 2 * p, cols - 2 * p));
  }
}

template <class T>
void interleave_rows_of(uint32_t* dst, int64_t ld_words, const T* src, int64_t lds, int rows,
                        int cols) {
  const int64_t width = cols < ld_words ? cols : ld_words;
  for (int r = 0; r < rows; r += 2) {
    const T* a = src + r * lds;
    const T* b = r + 1 < rows ? a + lds : nullptr;
    uint32_t* d = dst + (r / 2) * ld_words;
    int64_t c = 0;
    if (b)  // whole 32-column groups of a pair of rows
      for (; c + 32 <= width && c + 32 <= cols; c += 32) {
        __m512i lo, hi;
        column_words32(a + c, b + c, lo, hi);
        _mm512_storeu_si512(d + c, lo);
        _mm512_storeu_si512(d + c + 16, hi);
      }
    for (; c < width; c += 16)
      _mm512_mask_storeu_epi32(d + c, first(ld_words - c),
                               column_words(a + c, b ? b + c : nullptr, first(cols - c)));
  }
}

template <class T>
void interleave_rows_transposed_of(uint32_t* dst, int64_t ld_words, const T* src, int64_t lds,
                                   int rows, int cols) {
  const int64_t pairs = (rows + 1) / 2;
  // Pairs outer: each step reads 32 source rows left to right (one 16-column piece of each pair
  // of rows per register), then writes 16 rows of dst 16 words each.
  for (int64_t p0 = 0; p0 < pairs && p0 < ld_words; p0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16) {
      const __mmask16 k = first(cols - c0);
      __m512i r[16];
      for (int q = 0; q < 16; ++q) {
        const int64_t row = 2 * (p0 + q);
        const T* a = row < rows ? src + row * lds + c0 : nullptr;
        const T* b = row + 1 < rows ? a + lds : nullptr;
        r[q] = a ? column_words(a, b, k) : _mm512_setzero_si512();
      }
      transpose16(r);
      const int n = cols - c0 < 16 ? cols - c0 : 16;
      for (int i = 0; i < n; ++i)
        _mm512_mask_storeu_epi32(dst + (c0 + i) * ld_words + p0, first(ld_words - p0), r[i]);
    }
}

template <class T>
void pack_b_rows_of(uint32_t* dst, int n_padded, const T* src, int64_t lds, int rows, int cols,
                    int s0, int s1) {
  const int pairs = (rows + 1) / 2;
  PackedB layout;
  layout.pairs = pairs, layout.n_padded = n_padded;
  // Pair rows outer: each source row is read once (a weight gradient's B is a whole tile of
  // activations, read from memory), its strips written as it goes.
  for (int p = 0; p < pairs; ++p) {
    const T* a = src + int64_t(2 * p) * lds;
    const T* b = 2 * p + 1 < rows ? a + lds : nullptr;
    for (int s = s0; s < s1; ++s) {
      const int j0 = kStrip * s, w = layout.width(s);
      uint32_t* d = dst + int64_t(j0) * pairs + int64_t(p) * w;
      int c = 0;
      if (b && w == kStrip && j0 + kStrip <= cols) {  // a whole strip of a pair of rows
        __m512i lo, hi;
        column_words32(a + j0, b + j0, lo, hi);
        _mm512_storeu_si512(d, lo);
        _mm512_storeu_si512(d + 16, hi);
        c = kStrip;
      }
      for (; c < w; c += 16)
        _mm512_storeu_si512(
            d + c, column_words(a + j0 + c, b ? b + j0 + c : nullptr, first(cols - j0 - c)));
    }
  }
}

constexpr int kRowsWide = 14;    // NB = 2
constexpr int kRowsNarrow = 24;  // NB = 1
static_assert(kBlockRows % kRowsWide == 0 && kBlockRows % kRowsNarrow == 0, "whole tiles");

#define NOSTRUM_TILE(r)                                                                 \
  case r:                                                                               \
    tile<r, NB, PM>(C, ldc, a, b, n_valid, pairs, alpha, beta, overwrite, next, lines); \
    break;

template <int NB, bool PM>
void tile_rows(int mr, float* C, int64_t ldc, const uint32_t* a, const uint32_t* b, int n_valid,
               int pairs, float alpha, float beta, bool overwrite, Prefetch& next, int lines) {
  // clang-format off
  switch (mr) {
    default: break;
    NOSTRUM_TILE(1) NOSTRUM_TILE(2) NOSTRUM_TILE(3) NOSTRUM_TILE(4) NOSTRUM_TILE(5)
    NOSTRUM_TILE(6) NOSTRUM_TILE(7) NOSTRUM_TILE(8) NOSTRUM_TILE(9) NOSTRUM_TILE(10)
    NOSTRUM_TILE(11) NOSTRUM_TILE(12) NOSTRUM_TILE(13) NOSTRUM_TILE(14)
  }
  if constexpr (NB == 1) {
    switch (mr) {
      default: break;
      NOSTRUM_TILE(15) NOSTRUM_TILE(16) NOSTRUM_TILE(17) NOSTRUM_TILE(18) NOSTRUM_TILE(19)
      NOSTRUM_TILE(20) NOSTRUM_TILE(21) NOSTRUM_TILE(22) NOSTRUM_TILE(23) NOSTRUM_TILE(24)
    }
  }
  // clang-format on
}
#undef NOSTRUM_TILE

template <bool PM>
void block(float* C, int64_t ldc, const uint32_t* A, const PackedB& B, int p0, int j0, int M, int N,
           int pairs, float alpha, float beta, bool overwrite, Prefetch next) {
  constexpr int64_t kRow = PM ? 1 : kBlockPairs;
  // next's lines shared out over the tiles (at most 14-row tiles: a few to spare).
  const int tiles = ((N + kStrip - 1) / kStrip) * ((M + kRowsWide - 1) / kRowsWide);
  const int lines = int((next.lines_left() + tiles - 1) / tiles);
  for (int j = 0; j < N; j += kStrip) {
    const int n = N - j < kStrip ? N - j : kStrip;
    const uint32_t* b = B.at(p0, j0 + j);
    const bool wide = B.width((j0 + j) / kStrip) > 16;
    // As few tiles as the tile height allows, their heights alike (128 rows: 8 of 13 and 2 of 12,
    // not 9 of 14 and one of 2, whose 4 accumulators leave vdpbf16ps waiting on its latency).
    // Each C value's sum is the same whatever tile it falls in: the same bits.
    const int height = wide ? kRowsWide : kRowsNarrow;
    const int tiles_m = (M + height - 1) / height;
    for (int t = 0, i = 0; t < tiles_m; ++t) {
      const int mr = (M - i + (tiles_m - t) - 1) / (tiles_m - t);
      float* c = C + int64_t(i) * ldc + j;
      const uint32_t* a = A + i * kRow;
      if (wide)
        tile_rows<2, PM>(mr, c, ldc, a, b, n, pairs, alpha, beta, overwrite, next, lines);
      else
        tile_rows<1, PM>(mr, c, ldc, a, b, n, pairs, alpha, beta, overwrite, next, lines);
      i += mr;
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
  rows_to_words_of(dst, ld_words, src, lds, rows, cols);
}

void rows_to_words(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds, int rows,
                   int cols) {
  rows_to_words_of(dst, ld_words, src, lds, rows, cols);
}

void interleave_rows(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                     int cols) {
  interleave_rows_of(dst, ld_words, src, lds, rows, cols);
}

void interleave_rows(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds, int rows,
                     int cols) {
  interleave_rows_of(dst, ld_words, src, lds, rows, cols);
}

void interleave_rows_transposed(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds,
                                int rows, int cols) {
  interleave_rows_transposed_of(dst, ld_words, src, lds, rows, cols);
}

void interleave_rows_transposed(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds,
                                int rows, int cols) {
  interleave_rows_transposed_of(dst, ld_words, src, lds, rows, cols);
}

void pack_b_rows(uint32_t* dst, int n_padded, const float* src, int64_t lds, int rows, int cols,
                 int s0, int s1) {
  pack_b_rows_of(dst, n_padded, src, lds, rows, cols, s0, s1);
}

void pack_b_rows(uint32_t* dst, int n_padded, const uint16_t* src, int64_t lds, int rows, int cols,
                 int s0, int s1) {
  pack_b_rows_of(dst, n_padded, src, lds, rows, cols, s0, s1);
}

void pack_b_columns(uint32_t* dst, int n_padded, const float* src, int64_t lds, int n, int k,
                    int s0, int s1) {
  // Word (p, j) pairs two neighbours of src's row j: 16 rows' words for 16 pairs come from 16
  // contiguous loads (row_words, rounded as everywhere) and are transposed in registers, 16
  // columns x 16 pairs at a time (no gathers).
  const int pairs = (k + 1) / 2;
  PackedB layout;
  layout.pairs = pairs, layout.n_padded = n_padded;
  for (int s = s0; s < s1; ++s) {
    const int j0 = kStrip * s, w = layout.width(s);
    uint32_t* d = dst + int64_t(j0) * pairs;
    for (int c = 0; c < w; c += 16)
      for (int p0 = 0; p0 < pairs; p0 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          const int j = j0 + c + i;  // columns past n are 0
          r[i] = j < n ? row_words(src + int64_t(j) * lds + 2 * p0, k - 2 * p0)
                       : _mm512_setzero_si512();
        }
        transpose16(r);
        const int rows = pairs - p0 < 16 ? pairs - p0 : 16;
        for (int q = 0; q < rows; ++q) _mm512_storeu_si512(d + int64_t(p0 + q) * w + c, r[q]);
      }
  }
}

void gemm_block(float* C, int64_t ldc, const uint32_t* A, bool pair_major, const PackedB& B, int p0,
                int j0, int M, int N, int pairs, float alpha, float beta, bool overwrite,
                const Prefetch& next) {
  if (pair_major)
    block<true>(C, ldc, A, B, p0, j0, M, N, pairs, alpha, beta, overwrite, next);
  else
    block<false>(C, ldc, A, B, p0, j0, M, N, pairs, alpha, beta, overwrite, next);
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
