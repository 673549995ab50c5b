// NHWC im2col / col2im: per output pixel and kernel row, one contiguous copy of S*C input floats.
#include "nostrum/kernels/im2col.hpp"

#include <algorithm>
#include <cstring>

#include "nostrum/core/isa_dispatch.hpp"

namespace nostrum::kernels {

namespace {

// Where output row `row` reads: image n, top-left input corner (h0, w0), valid s in [s_lo, s_hi).
struct Window {
  int64_t n;
  int h0, w0, s_lo, s_hi;
};

inline Window window_of(const PatchShape& s, int64_t row) {
  const int64_t pq = int64_t(s.P) * s.Q;
  Window win;
  win.n = row / pq;
  const int64_t rest = row - win.n * pq;
  const int p = int(rest / s.Q), q = int(rest - int64_t(p) * s.Q);
  win.h0 = p * s.stride - s.pad;
  win.w0 = q * s.stride - s.pad;
  win.s_lo = std::max(0, -win.w0);
  win.s_hi = std::max(win.s_lo, std::min(s.S, s.W - win.w0));
  return win;
}

// dst[0, n) += src[0, n); one copy per ISA, picked through the CPU features table
// (nostrum/core/isa_dispatch.hpp; no -march=native).
NOSTRUM_ALWAYS_INLINE void add_into_body(float* __restrict dst, const float* __restrict src,
                                         int n) {
  for (int i = 0; i < n; ++i) dst[i] += src[i];
}
NOSTRUM_ISA_VARIANTS(, DispatchSite::kIm2colAdd, add_into,
                     (float* __restrict dst, const float* __restrict src, int n), (dst, src, n))

// im2col for either element type: copies, so the same code moves fp32 or bf16 values.
template <class T>
void im2col_rows(T* col, const T* in, const PatchShape& s, int64_t row_begin, int64_t row_end) {
  const int64_t row_len = s.row_length();
  const size_t run = size_t(s.S) * s.C;  // one kernel row: S*C values
  for (int64_t row = row_begin; row < row_end; ++row) {
    const Window win = window_of(s, row);
    T* dst = col + (row - row_begin) * row_len;
    for (int r = 0; r < s.R; ++r, dst += run) {
      const int h = win.h0 + r;
      if (h < 0 || h >= s.H || win.s_lo >= win.s_hi) {
        std::memset(dst, 0, run * sizeof(T));
        continue;
      }
      const T* src = in + ((win.n * s.H + h) * s.W + win.w0 + win.s_lo) * int64_t(s.C);
      const size_t lo = size_t(win.s_lo) * s.C, hi = size_t(win.s_hi) * s.C;
      if (lo > 0) std::memset(dst, 0, lo * sizeof(T));
      std::memcpy(dst + lo, src, (hi - lo) * sizeof(T));
      if (hi < run) std::memset(dst + hi, 0, (run - hi) * sizeof(T));
    }
  }
}

}  // namespace

void im2col_nhwc(float* col, const float* in, const PatchShape& s, int64_t row_begin,
                 int64_t row_end) {
  im2col_rows(col, in, s, row_begin, row_end);
}

void im2col_nhwc(uint16_t* col, const uint16_t* in, const PatchShape& s, int64_t row_begin,
                 int64_t row_end) {
  im2col_rows(col, in, s, row_begin, row_end);
}

void col2im_nhwc_add(float* d_in, const float* col, const PatchShape& s, int64_t row_begin,
                     int64_t row_end, int c_begin, int c_end) {
  const int64_t row_len = s.row_length();
  const int width = c_end - c_begin;
  if (width <= 0) return;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const Window win = window_of(s, row);
    const float* src_row = col + (row - row_begin) * row_len + c_begin;
    for (int r = 0; r < s.R; ++r) {
      const int h = win.h0 + r;
      if (h < 0 || h >= s.H) continue;
      const int64_t pixel0 = (win.n * s.H + h) * s.W + win.w0;  // may be < 0 before s_lo
      const float* src = src_row + int64_t(r) * s.S * s.C;
      for (int t = win.s_lo; t < win.s_hi; ++t)
        add_into(d_in + (pixel0 + t) * s.C + c_begin, src + int64_t(t) * s.C, width);
    }
  }
}

void pack_conv_weight(float* packed, const float* weight, int K, int C, int R, int S) {
  const int64_t rs = int64_t(R) * S, row_len = rs * C;
#pragma omp parallel for schedule(static)
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int64_t t = 0; t < rs; ++t)
        packed[k * row_len + t * C + c] = weight[(int64_t(k) * C + c) * rs + t];
}

void unpack_conv_weight(float* weight, const float* packed, int K, int C, int R, int S) {
  const int64_t rs = int64_t(R) * S, row_len = rs * C;
#pragma omp parallel for schedule(static)
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < C; ++c)
      for (int64_t t = 0; t < rs; ++t)
        weight[(int64_t(k) * C + c) * rs + t] = packed[k * row_len + t * C + c];
}

}  // namespace nostrum::kernels
