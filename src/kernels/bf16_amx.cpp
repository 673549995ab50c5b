// AMX tile loops of the mixed-precision GEMM (see bf16_amx.hpp): per 32-column strip of packed B
// and 32 rows of A's block, a 2 x 2 block of 16 x 16 fp32 accumulator tiles (tmm0-3) fed by two A
// tiles (tmm4-5, rows of A's row-major words) and two B tiles (tmm6-7, the strip's pair rows as
// they are packed: AMX's VNNI B layout), one tdpbf16ps each per 16 k-pairs; the accumulators are
// stored to a local buffer and combined with C (alpha, beta) in AVX-512. Compiled with -mamx-tile
// -mamx-bf16 and the AVX-512 flags; of the system headers only <immintrin.h> and <cstring>.
#include "bf16_amx.hpp"

#include <immintrin.h>

#include <cstring>

#include "amx_tile_config.hpp"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as merge sources and warn about it
// (GCC bug 105593, fixed in GCC 13): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace nostrum::kernels::bf16_amx {

namespace {

using amx::TileConfig;
using bf16_avx512::kStrip;

// Every tile 16 rows of 64 bytes: 16 x 16 fp32 accumulators, 16 rows x 16 k-pairs of A, 16
// k-pairs x 16 columns of B.
const TileConfig& full_tiles() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.bytes_per_row[t] = 64;
    return c;
  }();
  return config;
}

inline __mmask16 first(int n) {
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n > 0 ? n : 0)) - 1);
}

constexpr int kAStride = kBlockWords * 4;  // bytes between A's rows

// acc (32 x 32 fp32, row stride 32) = A rows [0, 16 * (1 + TWO_ROWS)) x B columns [0, 16 * (1 +
// TWO_COLS)) summed over `full` k-pairs from b (stride b_bytes), then `tail` (< 16) more from
// b_tail (16 rows, zero past tail; same stride) against A's words from `full` (zero past pairs).
template <bool TWO_ROWS, bool TWO_COLS>
void tiles(float* acc, const uint32_t* a, const uint32_t* b, int64_t b_bytes, int full, int tail,
           const uint32_t* b_tail) {
  const int64_t b_words = b_bytes / 4;
  _tile_zero(0);
  if (TWO_COLS) _tile_zero(1);
  if (TWO_ROWS) _tile_zero(2);
  if (TWO_ROWS && TWO_COLS) _tile_zero(3);
  const auto step = [&](const uint32_t* ap, const uint32_t* bp) {
    _tile_loadd(4, ap, kAStride);
    _tile_loadd(6, bp, b_bytes);
    if (TWO_COLS) _tile_loadd(7, bp + 16, b_bytes);
    _tile_dpbf16ps(0, 4, 6);
    if (TWO_COLS) _tile_dpbf16ps(1, 4, 7);
    if (TWO_ROWS) {
      _tile_loadd(5, ap + 16 * kBlockWords, kAStride);
      _tile_dpbf16ps(2, 5, 6);
      if (TWO_COLS) _tile_dpbf16ps(3, 5, 7);
    }
  };
  for (int p = 0; p < full; p += 16) step(a + p, b + p * b_words);
  if (tail > 0) step(a + full, b_tail);
  _tile_stored(0, acc, 32 * 4);
  if (TWO_COLS) _tile_stored(1, acc + 16, 32 * 4);
  if (TWO_ROWS) _tile_stored(2, acc + 16 * 32, 32 * 4);
  if (TWO_ROWS && TWO_COLS) _tile_stored(3, acc + 16 * 32 + 16, 32 * 4);
}

}  // namespace

void gemm_block(float* C, int64_t ldc, const uint32_t* A, const bf16_avx512::PackedB& B, int p0,
                int j0, int M, int N, int pairs, float alpha, float beta, bool overwrite) {
  _tile_loadconfig(&full_tiles());
  alignas(64) float acc[32 * 32];
  alignas(64) uint32_t b_tail[16 * kStrip];
  const int full = pairs / 16 * 16, tail = pairs - full;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int j = 0; j < N; j += kStrip) {
    const int n = N - j < kStrip ? N - j : kStrip;
    const int w = B.width((j0 + j) / kStrip);  // 16 or 32 words a pair row
    const uint32_t* b = B.at(p0, j0 + j);
    const int64_t b_bytes = int64_t(w) * 4;
    if (tail > 0) {  // the last pairs % 16 pair rows, zero-padded to a whole tile (never read past)
      std::memcpy(b_tail, b + int64_t(full) * w, size_t(tail) * size_t(w) * 4);
      std::memset(b_tail + tail * w, 0, size_t(16 - tail) * size_t(w) * 4);
    }
    const bool two_cols = n > 16;
    for (int i = 0; i < M; i += 32) {
      const uint32_t* a = A + int64_t(i) * kBlockWords;
      const bool two_rows = M - i > 16;
      if (two_rows && two_cols)
        tiles<true, true>(acc, a, b, b_bytes, full, tail, b_tail);
      else if (two_rows)
        tiles<true, false>(acc, a, b, b_bytes, full, tail, b_tail);
      else if (two_cols)
        tiles<false, true>(acc, a, b, b_bytes, full, tail, b_tail);
      else
        tiles<false, false>(acc, a, b, b_bytes, full, tail, b_tail);
      const int rows = M - i < 32 ? M - i : 32;
      for (int r = 0; r < rows; ++r)
        for (int h = 0; h < n; h += 16) {
          const __mmask16 k = first(n - h);
          float* c = C + int64_t(i + r) * ldc + j + h;
          __m512 v = _mm512_mul_ps(va, _mm512_load_ps(acc + r * 32 + h));
          if (!overwrite)
            v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c), v);
          else if (beta != 0.0f)
            v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k, c), v);
          _mm512_mask_storeu_ps(c, k, v);
        }
    }
  }
}

void release() {
  _tile_release();
}

}  // namespace nostrum::kernels::bf16_amx
