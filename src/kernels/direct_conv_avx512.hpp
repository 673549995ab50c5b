// The AVX-512 compute kernels of the direct convolution (src/kernels/direct_conv.cpp drives them).
// Private to src/kernels: direct_conv_avx512.cpp is compiled with -mavx512f and holds nothing but
// these loops, so no inline function of a shared header is ever emitted with AVX-512 instructions;
// the driver calls them only after checking the CPU at run time.
#pragma once

#include <cstdint>

namespace nostrum::kernels::avx512 {

// One image (or a band of its rows): the input already zero-padded.
struct DirectShape {
  int Wp = 0;                    // padded input width (floats from one channel line to the next)
  int Cin = 0, Cout = 0;         // channels in and out; Cout % 16 == 0
  int R = 1, S = 1, stride = 1;  // stride 1 or 2
  int P = 0, Q = 0;              // output height and width (the caller's ConvGeometry::P(), Q())
  // conv_rows only: floats from one output pixel to the next in a row, and from one output row to
  // the next (Cout and Q * Cout for a dense image; larger when the output is every other pixel of
  // a bigger image, as in the stride-2 data gradient's parity classes).
  int64_t out_pixel = 0, out_row = 0;
};

// out rows [p_begin, p_end) of one image (P, Q, Cout; pixel (p, q) at p * out_row + q * out_pixel)
// = (or += when accumulate) the convolution of
// img with wt. img holds padded input rows [row0, ...) channel-major within a row: element
// (h, c, w) at ((h - row0) * Cin + c) * Wp + w. wt holds the output channels in blocks of 32 (the
// last of 16 when Cout % 32 == 16), each block ((R, S, Cin), width) and contiguous: weight
// (k, r, s, c) at k0 * R*S*Cin + ((r * S + s) * Cin + c) * width + (k - k0), k0 = k - k % 32.
void conv_rows(float* out, const float* img, int row0, const float* wt, const DirectShape& s,
               int p_begin, int p_end, bool accumulate);

// dw ((R, S, Cin), Cout) += this image's weight gradient: img is the padded input (rows, Wp, Cin)
// (NHWC), dout the image's output gradient (P, Q, Cout). Sums pixels in (p, q) order.
void weight_grad_image(float* dw, const float* img, const float* dout, const DirectShape& s);

// dst[c * ld + w] = src[w * C + c] for w < W, c < C: W pixels of an NHWC row into C channel-major
// lines (16x16 register transposes when C % 16 == 0, element by element otherwise).
void transpose_row(float* dst, int64_t ld, const float* src, int W, int C);

}  // namespace nostrum::kernels::avx512
