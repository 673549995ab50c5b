// The AVX512_BF16 loops of the Winograd F(2x2, 3x3) convolution (src/kernels/winograd_conv.cpp
// drives them): the weight transform into the bf16 GEMM's packed B strips, the input transform of
// 4x4 tiles into A blocks of bf16 words, and the output transform back to the image. Private to
// src/kernels; compiled with -mavx512f -mavx512bw -mavx512bf16 and called only after the CPU check.
//
// The transforms (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016), for
// a 3x3 filter g, a 4x4 input tile d and its 2x2 output tile y, 16 positions xi = 4 * i + j:
//   U = G g G^T,  V = B^T d B,  y = A^T (sum over input channels of U . V) A,
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// U and V are computed in fp32 from the operands and rounded to bf16 once; the 16 GEMMs sum their
// products in fp32; the output transform is fp32.
#pragma once

#include <cstdint>

namespace nostrum::kernels::winograd_avx512 {

// One Winograd pass as a stride-1, pad-1 3x3 convolution of an (N, H, W, in) NHWC image into
// (N, H, W, out): the forward (in = C, out = K) or the data gradient (in = K, out = C, the filter
// turned by 180 degrees and its channels swapped), or the weight gradient (in = C, out = K).
// Tiles: tiles_y x tiles_x per image, row-major, images one after another.
struct Shape {
  int H = 0, W = 0;
  int in = 0, out = 0;  // channels: in a multiple of 32, out a multiple of 16
  int tiles_y() const { return (H + 1) / 2; }
  int tiles_x() const { return (W + 1) / 2; }
};

// The 16 U matrices as the bf16 GEMM's packed B (bf16_avx512::PackedB: pairs = in / 2 rows of
// words, out columns in strips of 32), U number xi at packed + xi * pairs * out, for the pairs
// [p0, p1). weight is (K, C, 3, 3) fp32; data_gradient: the filter of the data gradient (U from
// weight[k][c][2 - r][2 - s], rows k, columns c), else the forward's (rows c, columns k).
void transform_weights(uint32_t* packed, const float* weight, const Shape& s, bool data_gradient,
                       int p0, int p1);

// Where transform_input and transform_gradient write the words of position xi, tile i (of the
// call's tiles) and channel pair p: words + xi * xi_stride + i * row_stride + (p / 192) *
// block_stride + p % 192.
struct TileWords {
  int64_t xi_stride = 0, row_stride = 0, block_stride = 0;
};
// The forward's and the data gradient's A blocks: for position xi and pair block kb (pairs
// [192 kb, 192 kb + 192), bf16_avx512::kBlockPairs), the row-major words of tile i at
// a + ((xi * blocks + kb) * rows + i) * kBlockPairs, blocks = ceil(in / 384).
TileWords a_block_words(int rows, int in);
// The weight gradient's operands: position xi's (tiles x channels) bf16 matrix, row-major, for all
// `tiles` tiles: value (t, c) at xi * tiles * channels + t * channels + c (as words: pairs of
// channels).
TileWords matrix_words(int64_t tiles, int channels);

// V = B^T d B of the image's tiles [t0, t0 + tiles), in = s.in channels, rounded to bf16: from
// image_bf16 where it is non-null, else from the fp32 image rounded to bf16 first (the same bits).
void transform_input(uint32_t* words, const TileWords& at, const float* image,
                     const uint16_t* image_bf16, const Shape& s, int64_t t0, int tiles);
// The output gradient's tiles for the weight gradient: A dy A^T (4x4) of each 2x2 block of the
// (N, H, W, out) gradient (0 past the image), rounded to bf16; from d_out_bf16 or d_out as above.
void transform_gradient(uint32_t* words, const TileWords& at, const float* d_out,
                        const uint16_t* d_out_bf16, const Shape& s, int64_t t0, int tiles);
// The weight gradient from the 16 GEMMs' sums dU (position xi: an (out x in) matrix at
// du + xi * out * in): d_weight[k][c] = G^T dU[k][c] G for output channels [k0, k1), all input
// channels, d_weight (out, in, 3, 3) as PyTorch's (K, C, R, S).
void transform_weight_gradient(float* d_weight, const float* du, const Shape& s, int k0, int k1);

// The GEMMs' sums m (position xi, tile i at m + (xi * rows + i) * out) of tiles [t0, t0 + tiles)
// to the image: stored in fp32 (out), added to it (accumulate), or stored in bf16 (out_bf16
// non-null, out then unused).
void transform_output(float* out, uint16_t* out_bf16, bool accumulate, const float* m, int rows,
                      const Shape& s, int64_t t0, int tiles);

}  // namespace nostrum::kernels::winograd_avx512
