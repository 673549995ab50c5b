// The AVX512_BF16 loops of the Winograd F(2x2, 3x3) convolution: weight, input and output
// transforms (see winograd_avx512.hpp for the layouts and the transforms' matrices).
#include "winograd_avx512.hpp"

#include <immintrin.h>

#include "bf16_avx512.hpp"
#include "bf16_avx512_lanes.hpp"

namespace nostrum::kernels::winograd_avx512 {

namespace {

using bf16_avx512::kBlockPairs;
constexpr int kStrip = bf16_avx512::kStrip;

// G g G^T of 16 filters at once (g[3 * r + s], one lane each): u[4 * i + j].
inline void filter_transform(__m512 u[16], const __m512 g[9]) {
  const __m512 half = _mm512_set1_ps(0.5f);
  __m512 t[4][3];
  for (int s = 0; s < 3; ++s) {
    const __m512 g0 = g[s], g1 = g[3 + s], g2 = g[6 + s];
    const __m512 outer = _mm512_add_ps(g0, g2);
    t[0][s] = g0;
    t[1][s] = _mm512_mul_ps(half, _mm512_add_ps(outer, g1));
    t[2][s] = _mm512_mul_ps(half, _mm512_sub_ps(outer, g1));
    t[3][s] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    const __m512 outer = _mm512_add_ps(t[i][0], t[i][2]);
    u[4 * i + 0] = t[i][0];
    u[4 * i + 1] = _mm512_mul_ps(half, _mm512_add_ps(outer, t[i][1]));
    u[4 * i + 2] = _mm512_mul_ps(half, _mm512_sub_ps(outer, t[i][1]));
    u[4 * i + 3] = t[i][2];
  }
}

// Lane j's offset j * stride, for the gathers and scatters over 16 filters.
inline __m512i lane_offsets(int stride) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32(stride));
}

// Words (lo[j], hi[j]) for j < 16: bf16 of two rows' 16 columns, interleaved pair by pair.
inline __m512i pair_words(__m512 lo, __m512 hi) {
  // cvtne2ps puts lo's 16 values first, then hi's; word j takes value j and value 16 + j.
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

using bf16_lanes::widen;

// 32 channels of one pixel as fp32 values of bf16 operands: an fp32 image rounded to bf16 first
// (as every bf16 candidate rounds its operands), so that an image handed over in bf16 gives the
// same bits.
inline void load32(__m512& lo, __m512& hi, const float* p) {
  lo = widen((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(p)));
  hi = widen((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(p + 16)));
}
inline void load32(__m512& lo, __m512& hi, const uint16_t* p) {
  lo = widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  hi = widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
}

// B^T d B of one 4x4 tile, in place (d[4 * a + b]).
inline void input_transform(__m512 d[16]) {
  __m512 t[16];
  for (int b = 0; b < 4; ++b) {
    t[0 + b] = _mm512_sub_ps(d[0 + b], d[8 + b]);
    t[4 + b] = _mm512_add_ps(d[4 + b], d[8 + b]);
    t[8 + b] = _mm512_sub_ps(d[8 + b], d[4 + b]);
    t[12 + b] = _mm512_sub_ps(d[4 + b], d[12 + b]);
  }
  for (int a = 0; a < 4; ++a) {
    const __m512* r = t + 4 * a;
    d[4 * a + 0] = _mm512_sub_ps(r[0], r[2]);
    d[4 * a + 1] = _mm512_add_ps(r[1], r[2]);
    d[4 * a + 2] = _mm512_sub_ps(r[2], r[1]);
    d[4 * a + 3] = _mm512_sub_ps(r[1], r[3]);
  }
}

// The tile's position in the image: image n, its first input row and column (-1: the padding).
struct TilePlace {
  int64_t n;
  int ty, tx;
};
inline TilePlace place(int64_t t, const Shape& s) {
  const int64_t per_image = int64_t(s.tiles_y()) * s.tiles_x();
  const int rest = int(t % per_image);
  return {t / per_image, rest / s.tiles_x(), rest % s.tiles_x()};
}

// The 16 positions' words of 32 channels from c (lo: c..c+15, hi: c+16..c+31): cvtne2ps's order
// as it is (value j of lo, then of hi), which is channel order, so word w is channels
// (c + 2w, c + 2w + 1).
inline void store_positions(uint32_t* words, const TileWords& at, int i, int c, const __m512 lo[16],
                            const __m512 hi[16]) {
  const int p = c / 2;
  uint32_t* row = words + i * at.row_stride + (p / kBlockPairs) * at.block_stride + p % kBlockPairs;
  for (int xi = 0; xi < 16; ++xi)
    _mm512_storeu_si512(row + xi * at.xi_stride, (__m512i)_mm512_cvtne2ps_pbh(hi[xi], lo[xi]));
}

template <class T>
void transform_input_of(uint32_t* words, const TileWords& at, const T* image, const Shape& s,
                        int64_t t0, int tiles) {
  for (int i = 0; i < tiles; ++i) {
    const TilePlace tp = place(t0 + i, s);
    const int y0 = 2 * tp.ty - 1, x0 = 2 * tp.tx - 1;
    for (int c = 0; c < s.in; c += 32) {
      __m512 lo[16], hi[16];
      for (int u = 0; u < 4; ++u)
        for (int v = 0; v < 4; ++v) {
          const int y = y0 + u, x = x0 + v;
          if (y < 0 || y >= s.H || x < 0 || x >= s.W) {
            lo[4 * u + v] = hi[4 * u + v] = _mm512_setzero_ps();
            continue;
          }
          load32(lo[4 * u + v], hi[4 * u + v], image + ((tp.n * s.H + y) * s.W + x) * s.in + c);
        }
      input_transform(lo);
      input_transform(hi);
      store_positions(words, at, i, c, lo, hi);
    }
  }
}

// A dy A^T of one 2x2 block (dy[2 * a + b]) into the 16 positions (w[4 * i + j]); A's rows
// (1, 0), (1, 1), (1, -1), (0, -1).
inline void gradient_transform(__m512 w[16], const __m512 dy[4]) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 z[4][2];
  for (int b = 0; b < 2; ++b) {
    z[0][b] = dy[b];
    z[1][b] = _mm512_add_ps(dy[b], dy[2 + b]);
    z[2][b] = _mm512_sub_ps(dy[b], dy[2 + b]);
    z[3][b] = _mm512_sub_ps(zero, dy[2 + b]);
  }
  for (int i = 0; i < 4; ++i) {
    w[4 * i + 0] = z[i][0];
    w[4 * i + 1] = _mm512_add_ps(z[i][0], z[i][1]);
    w[4 * i + 2] = _mm512_sub_ps(z[i][0], z[i][1]);
    w[4 * i + 3] = _mm512_sub_ps(zero, z[i][1]);
  }
}

template <class T>
void transform_gradient_of(uint32_t* words, const TileWords& at, const T* d_out, const Shape& s,
                           int64_t t0, int tiles) {
  for (int i = 0; i < tiles; ++i) {
    const TilePlace tp = place(t0 + i, s);
    for (int k = 0; k < s.out; k += 32) {
      __m512 lo[4], hi[4];
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          const int y = 2 * tp.ty + a, x = 2 * tp.tx + b;
          if (y >= s.H || x >= s.W) {  // past the image: no output, no gradient
            lo[2 * a + b] = hi[2 * a + b] = _mm512_setzero_ps();
            continue;
          }
          load32(lo[2 * a + b], hi[2 * a + b], d_out + ((tp.n * s.H + y) * s.W + x) * s.out + k);
        }
      __m512 w_lo[16], w_hi[16];
      gradient_transform(w_lo, lo);
      gradient_transform(w_hi, hi);
      store_positions(words, at, i, k, w_lo, w_hi);
    }
  }
}

}  // namespace

void transform_weights(uint32_t* packed, const float* weight, const Shape& s, bool data_gradient,
                       int p0, int p1) {
  const int pairs = s.in / 2;
  // Filter (row a, column b) tap t at weight + a * row_stride + b * column_stride + tap(t).
  const int64_t row_stride = data_gradient ? int64_t(s.out) * 9 : 9;
  const int column_stride = data_gradient ? 9 : s.in * 9;
  const __m512i lanes = lane_offsets(column_stride);
  for (int p = p0; p < p1; ++p)
    for (int b0 = 0; b0 < s.out; b0 += 16) {
      __m512 u[2][16];
      for (int h = 0; h < 2; ++h) {
        const float* f = weight + int64_t(2 * p + h) * row_stride + int64_t(b0) * column_stride;
        __m512 g[9];
        for (int t = 0; t < 9; ++t)
          g[t] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, lanes,
                                          f + (data_gradient ? 8 - t : t), 4);
        filter_transform(u[h], g);
      }
      const int j0 = b0 / kStrip * kStrip;
      const int width = s.out - j0 < kStrip ? s.out - j0 : kStrip;
      for (int xi = 0; xi < 16; ++xi)
        _mm512_storeu_si512(packed + int64_t(xi) * pairs * s.out + int64_t(j0) * pairs +
                                int64_t(p) * width + (b0 - j0),
                            pair_words(u[0][xi], u[1][xi]));
    }
}

TileWords a_block_words(int rows, int in) {
  const int blocks = (in + 2 * kBlockPairs - 1) / (2 * kBlockPairs);
  TileWords at;
  at.row_stride = kBlockPairs;
  at.block_stride = int64_t(rows) * kBlockPairs;
  at.xi_stride = blocks * at.block_stride;
  return at;
}

TileWords matrix_words(int64_t tiles, int channels) {
  TileWords at;
  at.row_stride = channels / 2;
  at.block_stride = kBlockPairs;  // (p / 192) * 192 + p % 192 = p
  at.xi_stride = tiles * at.row_stride;
  return at;
}

void transform_input(uint32_t* words, const TileWords& at, const float* image,
                     const uint16_t* image_bf16, const Shape& s, int64_t t0, int tiles) {
  if (image_bf16)
    transform_input_of(words, at, image_bf16, s, t0, tiles);
  else
    transform_input_of(words, at, image, s, t0, tiles);
}
void transform_gradient(uint32_t* words, const TileWords& at, const float* d_out,
                        const uint16_t* d_out_bf16, const Shape& s, int64_t t0, int tiles) {
  if (d_out_bf16)
    transform_gradient_of(words, at, d_out_bf16, s, t0, tiles);
  else
    transform_gradient_of(words, at, d_out, s, t0, tiles);
}

void transform_weight_gradient(float* d_weight, const float* du, const Shape& s, int k0, int k1) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const int64_t xi_stride = int64_t(s.out) * s.in;
  // The 16 input channels' 3x3 gradients are 144 consecutive floats: lane c's tap t at 9c + t.
  const __m512i lanes = lane_offsets(9);
  for (int k = k0; k < k1; ++k)
    for (int c = 0; c < s.in; c += 16) {
      const float* d = du + int64_t(k) * s.in + c;
      __m512 q[3][4];  // G^T dU: rows r of the filter, columns j of the tile
      for (int j = 0; j < 4; ++j) {
        const __m512 d0 = _mm512_loadu_ps(d + (0 + j) * xi_stride);
        const __m512 d1 = _mm512_loadu_ps(d + (4 + j) * xi_stride);
        const __m512 d2 = _mm512_loadu_ps(d + (8 + j) * xi_stride);
        const __m512 d3 = _mm512_loadu_ps(d + (12 + j) * xi_stride);
        const __m512 sum = _mm512_mul_ps(half, _mm512_add_ps(d1, d2));
        q[0][j] = _mm512_add_ps(d0, sum);
        q[1][j] = _mm512_mul_ps(half, _mm512_sub_ps(d1, d2));
        q[2][j] = _mm512_add_ps(sum, d3);
      }
      float* out = d_weight + (int64_t(k) * s.in + c) * 9;
      for (int r = 0; r < 3; ++r) {
        const __m512 sum = _mm512_mul_ps(half, _mm512_add_ps(q[r][1], q[r][2]));
        const __m512 g[3] = {_mm512_add_ps(q[r][0], sum),
                             _mm512_mul_ps(half, _mm512_sub_ps(q[r][1], q[r][2])),
                             _mm512_add_ps(sum, q[r][3])};
        for (int t = 0; t < 3; ++t) _mm512_i32scatter_ps(out + 3 * r + t, lanes, g[t], 4);
      }
    }
}

void transform_output(float* out, uint16_t* out_bf16, bool accumulate, const float* m, int rows,
                      const Shape& s, int64_t t0, int tiles) {
  const int64_t xi_stride = int64_t(rows) * s.out;
  for (int i = 0; i < tiles; ++i) {
    const TilePlace tp = place(t0 + i, s);
    const bool second_column = 2 * tp.tx + 1 < s.W;
    for (int k = 0; k < s.out; k += 16) {
      const float* mk = m + int64_t(i) * s.out + k;
      __m512 r[2][4];  // A^T m: the two output rows' four columns
      for (int v = 0; v < 4; ++v) {
        const __m512 m0 = _mm512_loadu_ps(mk + (0 + v) * xi_stride);
        const __m512 m1 = _mm512_loadu_ps(mk + (4 + v) * xi_stride);
        const __m512 m2 = _mm512_loadu_ps(mk + (8 + v) * xi_stride);
        const __m512 m3 = _mm512_loadu_ps(mk + (12 + v) * xi_stride);
        r[0][v] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        r[1][v] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
      }
      for (int u = 0; u < 2; ++u) {
        const int y = 2 * tp.ty + u;
        if (y >= s.H) continue;
        __m512 o[2];
        o[0] = _mm512_add_ps(_mm512_add_ps(r[u][0], r[u][1]), r[u][2]);
        o[1] = _mm512_sub_ps(_mm512_sub_ps(r[u][1], r[u][2]), r[u][3]);
        const int64_t at = ((tp.n * s.H + y) * s.W + 2 * tp.tx) * s.out + k;
        for (int v = 0; v < (second_column ? 2 : 1); ++v) {
          const int64_t e = at + int64_t(v) * s.out;
          if (out_bf16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_bf16 + e),
                                (__m256i)_mm512_cvtneps_pbh(o[v]));
          else if (accumulate)
            _mm512_storeu_ps(out + e, _mm512_add_ps(_mm512_loadu_ps(out + e), o[v]));
          else
            _mm512_storeu_ps(out + e, o[v]);
        }
      }
    }
  }
}

}  // namespace nostrum::kernels::winograd_avx512
