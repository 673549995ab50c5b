// Direct convolution driver: checks the CPU, reorders the weights, zero-pads each image (or band of
// rows) into a per-thread buffer and hands it to the AVX-512 kernels (direct_conv_avx512.cpp).
#include "nostrum/kernels/direct_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "direct_conv_avx512.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/isa_dispatch.hpp"

namespace nostrum::kernels {

namespace {

// One buffer per thread, grown on first use and reused by every conv after (a few hundred KiB:
// one padded image, or one weight-gradient partial). The only memory the direct kernels take
// besides the caller's scratch; no call allocates once every shape has run.
float* thread_buffer(size_t floats, int which) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

// dst = buffer rows [row0, row1) of a window on image `img` (H, W, C): buffer row h and column w
// hold image row h + row_shift and column w + col_shift (zeros outside the image), channel-major
// within a row: (h, c, w) at ((h - row0) * C + c) * Wp + w.
void window_rows_channel_major(float* dst, const float* img, int H, int W, int C, int row_shift,
                               int col_shift, int Wp, int row0, int row1) {
  const int w_lo = std::clamp(-col_shift, 0, Wp), w_hi = std::clamp(W - col_shift, w_lo, Wp);
  for (int h = row0; h < row1; ++h) {
    float* line = dst + int64_t(h - row0) * C * Wp;
    const int y = h + row_shift;
    if (y < 0 || y >= H) {
      std::memset(line, 0, sizeof(float) * size_t(C) * Wp);
      continue;
    }
    for (int c = 0; c < C; ++c) {
      float* d = line + int64_t(c) * Wp;
      for (int w = 0; w < w_lo; ++w) d[w] = 0.0f;
      for (int w = w_hi; w < Wp; ++w) d[w] = 0.0f;
    }
    const float* src = img + (int64_t(y) * W + col_shift + w_lo) * C;
    avx512::transpose_row(line + w_lo, Wp, src, w_hi - w_lo, C);
  }
}

// dst (H + 2 pad, W + 2 pad, C) = image `img` (H, W, C) zero-padded.
void pad_image_nhwc(float* dst, const float* img, int H, int W, int C, int pad) {
  const int Wp = W + 2 * pad, Hp = H + 2 * pad;
  const size_t row = size_t(Wp) * C;
  for (int h = 0; h < Hp; ++h) {
    float* d = dst + h * row;
    const int y = h - pad;
    if (y < 0 || y >= H) {
      std::memset(d, 0, sizeof(float) * row);
      continue;
    }
    std::memset(d, 0, sizeof(float) * size_t(pad) * C);
    std::memcpy(d + size_t(pad) * C, img + int64_t(y) * W * C, sizeof(float) * size_t(W) * C);
    std::memset(d + size_t(pad + W) * C, 0, sizeof(float) * size_t(pad) * C);
  }
}

// The input of a run: each image (H, W, Cin) at in + n * in_image, seen through a window: buffer
// row h and column w hold image row h + row_shift and column w + col_shift (zeros outside the
// image), Wp buffer columns.
struct ConvWindow {
  const float* in = nullptr;
  int images = 1, H = 1, W = 1, Cin = 1;
  int64_t in_image = 0;
  int row_shift = 0, col_shift = 0, Wp = 1;
};

// One convolution over the window: output (P, Q, Cout) of image n at out + n * out_image, pixel
// (p, q) at p * out_row + q * out_pixel; output row p with kernel row r reads buffer row
// p * stride + row_offset + r, and likewise for columns.
struct ConvPart {
  float* out = nullptr;
  const float* wt = nullptr;
  int P = 1, Q = 1, Cout = 16, R = 1, S = 1, stride = 1;
  int row_offset = 0, col_offset = 0;
  int64_t out_image = 0, out_row = 0, out_pixel = 0;
};

// Every part over every image. Units of work are (image, band of output rows), so a small batch
// still feeds every thread; each unit fills only the buffer rows its band reads, once for all
// parts (the stride-2 data gradient's four parity classes read the same d_out rows). Parts share
// the stride; their P may differ (a band past a part's last row skips it).
void run_conv(const ConvWindow& w, const ConvPart* parts, int part_count, bool accumulate) {
  if (part_count == 0) return;
  // Output rows: the most of any part; buffer rows an output row p reads, relative to p * stride:
  // [offset_lo, reach_hi) over all parts.
  int P = 0, offset_lo = parts[0].row_offset, reach_hi = parts[0].row_offset + parts[0].R;
  for (int i = 0; i < part_count; ++i) {
    const ConvPart& part = parts[i];
    P = std::max(P, part.P);
    offset_lo = std::min(offset_lo, part.row_offset);
    reach_hi = std::max(reach_hi, part.row_offset + part.R);
  }
  if (P == 0) return;
  const int stride = parts[0].stride;
  const int threads = omp_get_max_threads();
  const int bands = std::min(P, std::max(1, (4 * threads + w.images - 1) / w.images));
  const int64_t units = int64_t(w.images) * bands;
#pragma omp parallel
  {
    // The largest band's buffer rows.
    const int band_rows = (P + bands - 1) / bands;
    const int rows = (band_rows - 1) * stride + reach_hi - offset_lo;
    float* buf = thread_buffer(size_t(rows) * w.Cin * w.Wp, 0);
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int n = int(u / bands), band = int(u % bands);
      const int p0 = int(int64_t(P) * band / bands), p1 = int(int64_t(P) * (band + 1) / bands);
      if (p0 == p1) continue;
      const int row0 = p0 * stride + offset_lo, row1 = (p1 - 1) * stride + reach_hi;
      window_rows_channel_major(buf, w.in + n * w.in_image, w.H, w.W, w.Cin, w.row_shift,
                                w.col_shift, w.Wp, row0, row1);
      for (int i = 0; i < part_count; ++i) {
        const ConvPart& part = parts[i];
        if (p0 >= part.P) continue;
        avx512::DirectShape ds;
        ds.Wp = w.Wp, ds.Cin = w.Cin, ds.Cout = part.Cout;
        ds.R = part.R, ds.S = part.S, ds.stride = part.stride, ds.P = part.P, ds.Q = part.Q;
        ds.out_pixel = part.out_pixel, ds.out_row = part.out_row;
        // The kernel reads buffer row p * stride + r - its row0, relative to the buffer's start.
        avx512::conv_rows(part.out + n * part.out_image, buf + part.col_offset,
                          row0 - part.row_offset, part.wt, ds, p0, std::min(p1, part.P),
                          accumulate);
      }
    }
  }
}

// The data gradient along one axis, for the input positions h = stride * i + parity (one class of
// each residue mod stride): they take kernel offsets r = first - stride * u (u = 0 .. count-1) from
// output rows i + shift + u. count is 0 when no offset reaches the class. Stride 1: one class,
// every offset, flipped (first = R-1), shift = pad - (R-1).
struct Taps {
  int first = 0, count = 0, shift = 0;
};

Taps taps_of(int parity, int pad, int R, int stride) {
  Taps t;
  int r = R - 1;
  while (r >= 0 && (r - parity - pad) % stride != 0) --r;  // the largest offset of the class
  if (r < 0) return t;
  t.first = r;
  t.count = r / stride + 1;
  t.shift = (parity + pad - r) / stride;  // exact: parity + pad - r is a multiple of stride
  return t;
}

// Where output channel `k` of input position `i` (an (r, t, c) index of `positions`) goes in the
// packed weights: blocks of 32 output channels (the last of 16 when out % 32 == 16), each
// (positions, width) and contiguous (avx512::conv_rows).
inline int64_t blocked_index(int64_t k, int64_t i, int64_t positions, int64_t out) {
  const int64_t k0 = k - k % 32, width = std::min<int64_t>(32, out - k0);
  return k0 * positions + i * width + (k - k0);
}

}  // namespace

bool direct_conv_available() {
  return cpu_features().avx512f;
}

bool direct_conv_forward_fits(const ConvGeometry& s) {
  return direct_conv_available() && s.K % 16 == 0 && (s.stride == 1 || s.stride == 2);
}

bool direct_conv_backward_data_fits(const ConvGeometry& s) {
  return direct_conv_available() && s.C % 16 == 0 && (s.stride == 1 || s.stride == 2);
}

bool direct_conv_backward_weights_fits(const ConvGeometry& s) {
  return direct_conv_available() && s.K % 16 == 0 && (s.stride == 1 || s.stride == 2);
}

size_t direct_conv_packed_floats(const ConvGeometry& s) {
  return size_t(s.K) * s.C * s.R * s.S;
}

void direct_conv_forward(float* out, const float* in, const float* weight, const ConvGeometry& s,
                         float* packed) {
  note_dispatch(DispatchSite::kDirectConv, Isa::kAvx512);
  // packed in blocks of 32 output channels (conv_rows): (r, t, c, k) = weight (k, c, r, t)
  const int64_t RS = int64_t(s.R) * s.S;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < RS * s.C; ++i) {
    const int64_t rt = i / s.C, c = i % s.C;
    for (int k = 0; k < s.K; ++k)
      packed[blocked_index(k, i, RS * s.C, s.K)] = weight[(k * int64_t(s.C) + c) * RS + rt];
  }
  ConvWindow w;
  w.in = in, w.images = s.N, w.H = s.H, w.W = s.W, w.Cin = s.C;
  w.in_image = int64_t(s.H) * s.W * s.C;
  w.row_shift = w.col_shift = -s.pad, w.Wp = s.W + 2 * s.pad;
  ConvPart part;
  part.out = out, part.wt = packed;
  part.P = s.P(), part.Q = s.Q(), part.Cout = s.K, part.R = s.R, part.S = s.S;
  part.stride = s.stride;
  part.out_pixel = s.K, part.out_row = int64_t(part.Q) * s.K;
  part.out_image = int64_t(part.P) * part.out_row;
  run_conv(w, &part, 1, false);
}

void direct_conv_backward_data(float* d_in, const float* d_out, const float* weight,
                               const ConvGeometry& s, float* packed, bool accumulate) {
  note_dispatch(DispatchSite::kDirectConv, Isa::kAvx512);
  // Each class of input pixels (h = stride * i + a, w = stride * j + b) is a stride-1 convolution
  // of d_out with the kernel offsets that reach it, flipped and with the channels swapped, written
  // to every stride-th pixel of every stride-th row of d_in (stride 1: one class, all of d_in).
  // The classes are parts of one run: each band of d_out is laid out once for all of them.
  const int P = s.P(), Q = s.Q();
  const int64_t RS = int64_t(s.R) * s.S;
  const int64_t in_image = int64_t(s.H) * s.W * s.C;
  struct Class {
    int a, b, Ha, Wb;
    Taps tr, ts;
  };
  Class classes[4];  // one per parity class: stride 1 or 2
  int class_count = 0;
  for (int a = 0; a < s.stride; ++a)
    for (int b = 0; b < s.stride; ++b) {
      const int Ha = (s.H - a + s.stride - 1) / s.stride, Wb = (s.W - b + s.stride - 1) / s.stride;
      if (Ha <= 0 || Wb <= 0) continue;
      const Taps tr = taps_of(a, s.pad, s.R, s.stride), ts = taps_of(b, s.pad, s.S, s.stride);
      float* out = d_in + (int64_t(a) * s.W + b) * s.C;
      if (tr.count > 0 && ts.count > 0) {
        classes[class_count++] = {a, b, Ha, Wb, tr, ts};
        continue;
      }
      if (accumulate) continue;  // no kernel offset reaches these pixels: their gradient is 0
#pragma omp parallel for schedule(static)
      for (int64_t ni = 0; ni < int64_t(s.N) * Ha; ++ni) {
        const int64_t n = ni / Ha, i = ni % Ha;
        for (int j = 0; j < Wb; ++j)
          std::memset(out + n * in_image + i * s.stride * s.W * s.C + j * s.stride * s.C, 0,
                      sizeof(float) * size_t(s.C));
      }
    }
  if (class_count == 0) return;
  ConvWindow w;
  w.in = d_out, w.images = s.N, w.H = P, w.W = Q, w.Cin = s.K, w.in_image = int64_t(P) * Q * s.K;
  w.row_shift = classes[0].tr.shift, w.col_shift = classes[0].ts.shift;
  for (int i = 0; i < class_count; ++i) {
    const Class& k = classes[i];
    w.row_shift = std::min(w.row_shift, k.tr.shift);
    w.col_shift = std::min(w.col_shift, k.ts.shift);
  }
  ConvPart parts[4];
  float* wt = packed;
  for (int ci = 0; ci < class_count; ++ci) {
    const Class& k = classes[ci];
    const int64_t taps = int64_t(k.tr.count) * k.ts.count;
    // wt (u, v, k, c) = weight (k, c, first_r - stride u, first_s - stride v), blocked by c.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < taps * s.K; ++i) {
      const int64_t uv = i / s.K, kk = i % s.K;
      const int64_t r = k.tr.first - s.stride * (uv / k.ts.count);
      const int64_t t = k.ts.first - s.stride * (uv % k.ts.count);
      for (int c2 = 0; c2 < s.C; ++c2)
        wt[blocked_index(c2, i, taps * s.K, s.C)] = weight[(kk * s.C + c2) * RS + r * s.S + t];
    }
    ConvPart part;
    part.out = d_in + (int64_t(k.a) * s.W + k.b) * s.C, part.wt = wt;
    part.P = k.Ha, part.Q = k.Wb, part.Cout = s.C, part.R = k.tr.count, part.S = k.ts.count;
    part.row_offset = k.tr.shift - w.row_shift, part.col_offset = k.ts.shift - w.col_shift;
    part.out_image = in_image;
    part.out_pixel = int64_t(s.stride) * s.C, part.out_row = int64_t(s.stride) * s.W * s.C;
    w.Wp = std::max(w.Wp, part.col_offset + k.Wb + k.ts.count - 1);
    parts[ci] = part;
    wt += taps * s.K * s.C;
  }
  run_conv(w, parts, class_count, accumulate);
}

void direct_conv_backward_weights(float* d_weight, const float* d_out, const float* in,
                                  const ConvGeometry& s) {
  note_dispatch(DispatchSite::kDirectConv, Isa::kAvx512);
  avx512::DirectShape ds;
  ds.Wp = s.W + 2 * s.pad, ds.Cin = s.C, ds.Cout = s.K;
  ds.R = s.R, ds.S = s.S, ds.stride = s.stride, ds.P = s.P(), ds.Q = s.Q();
  const size_t count = size_t(s.K) * s.C * s.R * s.S;
  const int threads = omp_get_max_threads();
  // Each thread's partial, for the sum in thread order (grown on first use, like the buffers).
  // (A thread_local of the calling thread: the parallel region below uses it through a pointer.)
  thread_local std::vector<float*> partial_list;
  if (partial_list.size() < size_t(threads)) partial_list.resize(size_t(threads));
  float** partials = partial_list.data();
  const int64_t in_image = int64_t(s.H) * s.W * s.C, out_image = int64_t(ds.P) * ds.Q * s.K;
  const int64_t RS = int64_t(s.R) * s.S;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* partial = thread_buffer(count, 1);
    partials[size_t(t)] = partial;
    std::memset(partial, 0, count * sizeof(float));
    float* img = thread_buffer(size_t(s.H + 2 * s.pad) * ds.Wp * s.C, 0);
    // Contiguous images per thread, in order: the partial's sums are fixed for a thread count.
    const int n0 = int(int64_t(s.N) * t / nt), n1 = int(int64_t(s.N) * (t + 1) / nt);
    for (int n = n0; n < n1; ++n) {
      pad_image_nhwc(img, in + n * in_image, s.H, s.W, s.C, s.pad);
      avx512::weight_grad_image(partial, img, d_out + n * out_image, ds);
    }
#pragma omp barrier
    // d_weight (k, c, r, t) = sum over threads, in thread order, of partial ((r, t, c), k).
#pragma omp for schedule(static)
    for (int64_t kc = 0; kc < int64_t(s.K) * s.C; ++kc) {
      const int64_t k = kc / s.C, c = kc % s.C;
      for (int64_t rt = 0; rt < RS; ++rt) {
        const size_t i = size_t((rt * s.C + c) * s.K + k);
        float sum = partials[0][i];
        for (int u = 1; u < nt; ++u) sum += partials[size_t(u)][i];
        d_weight[kc * RS + rt] = sum;
      }
    }
  }
}

}  // namespace nostrum::kernels
