// NHWC im2col / col2im and the conv weight reorder. A column row holds one output pixel's receptive
// field in (R, S, C) order, so for a fixed r the S*C values are one contiguous run of the input
// row.
#pragma once

#include <cstdint>

namespace nostrum::kernels {

// A sliding window over NHWC images: input (N, H, W, C), kernel R x S, output (N, P, Q); P and Q
// are the conv's (ConvGeometry::P(), Q()), stored so the per-row index arithmetic reads them.
struct PatchShape {
  int N = 1, H = 1, W = 1, C = 1;
  int R = 1, S = 1, stride = 1, pad = 0;
  int P = 1, Q = 1;
  int64_t rows() const { return int64_t(N) * P * Q; }  // output pixels
  int64_t row_length() const { return int64_t(R) * S * C; }
};

// col (row_end - row_begin, R*S*C) = patches of in (N,H,W,C) for output rows [row_begin, row_end)
// of the flattened (N, P, Q) index; padding positions are written as 0. Single-threaded.
void im2col_nhwc(float* col, const float* in, const PatchShape& s, int64_t row_begin,
                 int64_t row_end);
// The same for bf16 values (a bf16 run's activations handed over in bf16): copied as they are.
void im2col_nhwc(uint16_t* col, const uint16_t* in, const PatchShape& s, int64_t row_begin,
                 int64_t row_end);

// d_in (N,H,W,C) += col (row_end - row_begin, R*S*C) scattered back, for channels [c_begin, c_end)
// only (threads that own disjoint channel ranges or disjoint images never race). Single-threaded.
void col2im_nhwc_add(float* d_in, const float* col, const PatchShape& s, int64_t row_begin,
                     int64_t row_end, int c_begin, int c_end);

// packed (K, R*S*C) in (r, s, c) order from weight (K, C, R, S); OpenMP-parallel over k.
void pack_conv_weight(float* packed, const float* weight, int K, int C, int R, int S);
// weight (K, C, R, S) from packed (K, R*S*C); OpenMP-parallel over k.
void unpack_conv_weight(float* weight, const float* packed, int K, int C, int R, int S);

}  // namespace nostrum::kernels
