// AVX-512 register-tiled direct convolution kernels (see direct_conv_avx512.hpp). Forward: a tile
// of up to 14 output pixels x 16 or 32 output channels lives in registers across all (r, s, c);
// each step loads the weights' 16-channel vectors once and broadcasts one input value per pixel.
// Weight gradient: up to 16 input channels x 16 or 32 output channels in registers, summed over
// the image's output pixels in L2-sized blocks of rows. Also the 16x16 register transposes that lay
// NHWC rows out channel-major for the forward kernel. Compiled with -mavx512f; only <immintrin.h>
// is included.
#include "direct_conv_avx512.hpp"

#include <immintrin.h>

// GCC 12's AVX-512 unpack/shuffle intrinsics pass _mm512_undefined_ps() as the merge source and
// warn about it under -Wmaybe-uninitialized (GCC bug 105593, fixed in GCC 13): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace nostrum::kernels::avx512 {

namespace {

constexpr int kMaxPixels = 14;  // forward tile: 14 x 2 accumulators + 2 weight vectors < 32 zmm

// out[m, k0 .. k0 + 16*KB) for MT output pixels of row p starting at column q0.
template <int KB, int MT, int ST>
__attribute__((noinline)) void conv_tile(float* out, const float* img, int row0, const float* wt,
                                         const DirectShape& s, int p, int q0, int k0,
                                         bool accumulate) {
  __m512 acc[MT][KB];
#pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) acc[m][b] = _mm512_setzero_ps();
  const int64_t line = int64_t(s.Cin) * s.Wp;  // one padded input row, all channels
  for (int r = 0; r < s.R; ++r) {
    const float* row = img + int64_t(p * ST + r - row0) * line + int64_t(q0) * ST;
    for (int t = 0; t < s.S; ++t) {
      const float* x = row + t;
      // This block of output channels' weights is contiguous (see DirectShape): one step is
      // 16*KB floats, so the weights stream through the cache lines in order.
      const float* w =
          wt + int64_t(k0) * s.R * s.S * s.Cin + int64_t(r * s.S + t) * s.Cin * 16 * KB;
      for (int c = 0; c < s.Cin; ++c, x += s.Wp, w += 16 * KB) {
        __m512 wv[KB];
#pragma GCC unroll 4
        for (int b = 0; b < KB; ++b) wv[b] = _mm512_loadu_ps(w + 16 * b);
#pragma GCC unroll 16
        for (int m = 0; m < MT; ++m) {
          const __m512 v = _mm512_set1_ps(x[m * ST]);
#pragma GCC unroll 4
          for (int b = 0; b < KB; ++b) acc[m][b] = _mm512_fmadd_ps(v, wv[b], acc[m][b]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) {
      float* o = out + int64_t(m) * s.out_pixel + k0 + 16 * b;
      const __m512 v = accumulate ? _mm512_add_ps(_mm512_loadu_ps(o), acc[m][b]) : acc[m][b];
      _mm512_storeu_ps(o, v);
    }
}

// One output row, output channels [k0, k0 + 16*KB): full tiles, then one narrower tile.
template <int KB, int ST>
void conv_row(float* out_row, const float* img, int row0, const float* wt, const DirectShape& s,
              int p, int k0, bool accumulate) {
  int q = 0;
  for (; q + kMaxPixels <= s.Q; q += kMaxPixels)
    conv_tile<KB, kMaxPixels, ST>(out_row + int64_t(q) * s.out_pixel, img, row0, wt, s, p, q, k0,
                                  accumulate);
  float* o = out_row + int64_t(q) * s.out_pixel;
  switch (s.Q - q) {
    default:
      break;
      // clang-format off
#define NOSTRUM_TILE(mt)                                              \
  case mt:                                                            \
    conv_tile<KB, mt, ST>(o, img, row0, wt, s, p, q, k0, accumulate); \
    break;
    NOSTRUM_TILE(1) NOSTRUM_TILE(2) NOSTRUM_TILE(3) NOSTRUM_TILE(4) NOSTRUM_TILE(5)
    NOSTRUM_TILE(6) NOSTRUM_TILE(7) NOSTRUM_TILE(8) NOSTRUM_TILE(9) NOSTRUM_TILE(10)
    NOSTRUM_TILE(11) NOSTRUM_TILE(12) NOSTRUM_TILE(13)
#undef NOSTRUM_TILE
      // clang-format on
  }
}

template <int ST>
void conv_rows_strided(float* out, const float* img, int row0, const float* wt,
                       const DirectShape& s, int p_begin, int p_end, bool accumulate) {
  for (int p = p_begin; p < p_end; ++p) {
    float* out_row = out + int64_t(p) * s.out_row;
    int k0 = 0;
    for (; k0 + 32 <= s.Cout; k0 += 32)
      conv_row<2, ST>(out_row, img, row0, wt, s, p, k0, accumulate);
    if (k0 < s.Cout) conv_row<1, ST>(out_row, img, row0, wt, s, p, k0, accumulate);
  }
}

// dw[(r, t, c0 .. c0 + CT), k0 .. k0 + 16*KB) += sum over pixels of img * dout.
template <int KB, int CT, int ST>
__attribute__((noinline)) void weight_grad_block(float* dw, const float* img, const float* dout,
                                                 const DirectShape& s, int r, int t, int c0, int k0,
                                                 int p0, int p1) {
  __m512 acc[CT][KB];
  float* base = dw + (int64_t(r * s.S + t) * s.Cin + c0) * s.Cout + k0;
#pragma GCC unroll 16
  for (int c = 0; c < CT; ++c)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) acc[c][b] = _mm512_loadu_ps(base + int64_t(c) * s.Cout + 16 * b);
  for (int p = p0; p < p1; ++p) {
    const float* x = img + (int64_t(p * ST + r) * s.Wp + t) * s.Cin + c0;
    const float* d = dout + int64_t(p) * s.Q * s.Cout + k0;
    for (int q = 0; q < s.Q; ++q, x += ST * s.Cin, d += s.Cout) {
      __m512 dv[KB];
#pragma GCC unroll 4
      for (int b = 0; b < KB; ++b) dv[b] = _mm512_loadu_ps(d + 16 * b);
#pragma GCC unroll 16
      for (int c = 0; c < CT; ++c) {
        const __m512 v = _mm512_set1_ps(x[c]);
#pragma GCC unroll 4
        for (int b = 0; b < KB; ++b) acc[c][b] = _mm512_fmadd_ps(v, dv[b], acc[c][b]);
      }
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < CT; ++c)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) _mm512_storeu_ps(base + int64_t(c) * s.Cout + 16 * b, acc[c][b]);
}

// All input channels for one (r, t) and output channels [k0, k0 + 16*KB): blocks of CT_MAX
// channels, the rest in blocks of 8, 4, 2, 1.
template <int KB, int CT_MAX, int ST>
void weight_grad_channels(float* dw, const float* img, const float* dout, const DirectShape& s,
                          int r, int t, int k0, int p0, int p1) {
  int c = 0;
  for (; c + CT_MAX <= s.Cin; c += CT_MAX)
    weight_grad_block<KB, CT_MAX, ST>(dw, img, dout, s, r, t, c, k0, p0, p1);
  if (CT_MAX > 8)
    for (; c + 8 <= s.Cin; c += 8)
      weight_grad_block<KB, 8, ST>(dw, img, dout, s, r, t, c, k0, p0, p1);
  for (; c + 4 <= s.Cin; c += 4)
    weight_grad_block<KB, 4, ST>(dw, img, dout, s, r, t, c, k0, p0, p1);
  for (; c + 2 <= s.Cin; c += 2)
    weight_grad_block<KB, 2, ST>(dw, img, dout, s, r, t, c, k0, p0, p1);
  for (; c < s.Cin; ++c) weight_grad_block<KB, 1, ST>(dw, img, dout, s, r, t, c, k0, p0, p1);
}

// Output rows in blocks whose output gradient (and the input rows they read) stay in L2 while every
// (r, t, channel block) pass goes over them: a whole 56x56x64 image's d_out is 800 KB and was
// re-read from memory by each of the 144 passes, so the weight gradient stopped scaling past two
// threads. The sums run over the rows in the same order, so the result is the same bits.
constexpr int64_t kWeightGradBlockFloats = int64_t(1) << 14;  // 64 KiB of d_out per block

template <int ST>
void weight_grad_strided(float* dw, const float* img, const float* dout, const DirectShape& s) {
  const int64_t row_floats = int64_t(s.Q) * s.Cout;
  const int block =
      row_floats >= kWeightGradBlockFloats ? 1 : int(kWeightGradBlockFloats / row_floats);
  for (int p0 = 0; p0 < s.P; p0 += block) {
    const int p1 = p0 + block < s.P ? p0 + block : s.P;
    for (int r = 0; r < s.R; ++r)
      for (int t = 0; t < s.S; ++t) {
        int k0 = 0;
        for (; k0 + 32 <= s.Cout; k0 += 32)
          weight_grad_channels<2, 8, ST>(dw, img, dout, s, r, t, k0, p0, p1);
        if (k0 < s.Cout) weight_grad_channels<1, 16, ST>(dw, img, dout, s, r, t, k0, p0, p1);
      }
  }
}

// r[i] (16 rows of 16) becomes its transpose: in-lane 32- and 64-bit interleaves, then two rounds
// of 128-bit lane shuffles.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16], v[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x44);
    v[4 + i] = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xEE);
    v[8 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0x44);
    v[12 + i] = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(v[i], v[8 + i], 0x88);
    r[i + 4] = _mm512_shuffle_f32x4(v[i], v[8 + i], 0xDD);
    r[i + 8] = _mm512_shuffle_f32x4(v[4 + i], v[12 + i], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(v[4 + i], v[12 + i], 0xDD);
  }
}

}  // namespace

void transpose_row(float* dst, int64_t ld, const float* src, int W, int C) {
  if (C % 16 != 0) {
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < C; ++c) dst[int64_t(c) * ld + w] = src[int64_t(w) * C + c];
    return;
  }
  for (int w0 = 0; w0 < W; w0 += 16) {
    const int n = W - w0 < 16 ? W - w0 : 16;  // pixels in this block
    const __mmask16 keep = __mmask16((1u << n) - 1u);
    for (int c0 = 0; c0 < C; c0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < n ? _mm512_loadu_ps(src + int64_t(w0 + i) * C + c0) : _mm512_setzero_ps();
      transpose16x16(r);
      for (int j = 0; j < 16; ++j)
        _mm512_mask_storeu_ps(dst + int64_t(c0 + j) * ld + w0, keep, r[j]);
    }
  }
}

void conv_rows(float* out, const float* img, int row0, const float* wt, const DirectShape& s,
               int p_begin, int p_end, bool accumulate) {
  if (s.stride == 1)
    conv_rows_strided<1>(out, img, row0, wt, s, p_begin, p_end, accumulate);
  else
    conv_rows_strided<2>(out, img, row0, wt, s, p_begin, p_end, accumulate);
}

void weight_grad_image(float* dw, const float* img, const float* dout, const DirectShape& s) {
  if (s.stride == 1)
    weight_grad_strided<1>(dw, img, dout, s);
  else
    weight_grad_strided<2>(dw, img, dout, s);
}

}  // namespace nostrum::kernels::avx512
