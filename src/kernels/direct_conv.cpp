// Direct convolution driver: checks the CPU, reorders the weights, zero-pads each image (or band of
// rows) into a per-thread buffer and hands it to the AVX-512 kernels (direct_conv_avx512.cpp).
#include "nostrum/kernels/direct_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "direct_conv_avx512.hpp"

namespace nostrum::kernels {

namespace {

// One buffer per thread, grown on first use and reused by every conv after (a few hundred KiB:
// one padded image).
float* thread_buffer(size_t floats, int which) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

// dst = padded rows [row0, row1) of image `img` (H, W, C), channel-major within a row:
// (h, c, w) at ((h - row0) * C + c) * Wp + w, zeros outside the image.
void pad_rows_channel_major(float* dst, const float* img, int H, int W, int C, int pad, int row0,
                            int row1) {
  const int Wp = W + 2 * pad;
  for (int h = row0; h < row1; ++h) {
    float* line = dst + int64_t(h - row0) * C * Wp;
    const int y = h - pad;
    if (y < 0 || y >= H) {
      std::memset(line, 0, sizeof(float) * size_t(C) * Wp);
      continue;
    }
    for (int c = 0; c < C; ++c) {
      float* d = line + int64_t(c) * Wp;
      for (int w = 0; w < pad; ++w) d[w] = 0.0f, d[Wp - 1 - w] = 0.0f;
    }
    const float* src = img + int64_t(y) * W * C;
    for (int w = 0; w < W; ++w)
      for (int c = 0; c < C; ++c) line[int64_t(c) * Wp + pad + w] = src[int64_t(w) * C + c];
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

// Runs the forward kernel over `images` images of (H, W, Cin) -> (P, Q, Cout) with weights wt
// ((R, S, Cin), Cout): units of work are bands of output rows, so a small batch still feeds every
// thread; each unit pads only the input rows its band reads.
void run_conv(float* out, const float* in, const float* wt, int images, int H, int W, int Cin,
              int Cout, int R, int S, int stride, int pad, bool accumulate) {
  avx512::DirectShape ds;
  ds.Wp = W + 2 * pad, ds.Hp = H + 2 * pad, ds.Cin = Cin, ds.Cout = Cout;
  ds.R = R, ds.S = S, ds.stride = stride;
  ds.P = (H + 2 * pad - R) / stride + 1, ds.Q = (W + 2 * pad - S) / stride + 1;
  const int threads = omp_get_max_threads();
  const int bands = std::min(ds.P, std::max(1, (4 * threads + images - 1) / images));
  const int64_t units = int64_t(images) * bands;
  const int64_t in_image = int64_t(H) * W * Cin, out_image = int64_t(ds.P) * ds.Q * Cout;
#pragma omp parallel
  {
    // The largest band's input rows.
    const int band_rows = (ds.P + bands - 1) / bands;
    const int rows = (band_rows - 1) * stride + R;
    float* buf = thread_buffer(size_t(rows) * Cin * ds.Wp, 0);
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const int n = int(u / bands), band = int(u % bands);
      const int p0 = int(int64_t(ds.P) * band / bands), p1 = int(int64_t(ds.P) * (band + 1) / bands);
      if (p0 == p1) continue;
      const int row0 = p0 * stride, row1 = (p1 - 1) * stride + R;
      pad_rows_channel_major(buf, in + n * in_image, H, W, Cin, pad, row0, row1);
      avx512::conv_rows(out + n * out_image, buf, row0, wt, ds, p0, p1, accumulate);
    }
  }
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
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
}

bool direct_conv_forward_fits(const DirectConvShape& s) {
  return direct_conv_available() && s.K % 16 == 0 && (s.stride == 1 || s.stride == 2);
}

bool direct_conv_backward_data_fits(const DirectConvShape& s) {
  return direct_conv_available() && s.stride == 1 && s.C % 16 == 0 && s.R == s.S &&
         s.pad < s.R;
}

bool direct_conv_backward_weights_fits(const DirectConvShape& s) {
  return direct_conv_available() && s.K % 16 == 0 && (s.stride == 1 || s.stride == 2);
}

size_t direct_conv_packed_floats(const DirectConvShape& s) {
  return size_t(s.K) * s.C * s.R * s.S;
}

void direct_conv_forward(float* out, const float* in, const float* weight,
                         const DirectConvShape& s, float* packed) {
  // packed in blocks of 32 output channels (conv_rows): (r, t, c, k) = weight (k, c, r, t)
  const int64_t RS = int64_t(s.R) * s.S;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < RS * s.C; ++i) {
    const int64_t rt = i / s.C, c = i % s.C;
    for (int k = 0; k < s.K; ++k)
      packed[blocked_index(k, i, RS * s.C, s.K)] = weight[(k * int64_t(s.C) + c) * RS + rt];
  }
  run_conv(out, in, packed, s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride, s.pad, false);
}

void direct_conv_backward_data(float* d_in, const float* d_out, const float* weight,
                               const DirectConvShape& s, float* packed, bool accumulate) {
  // Stride 1: d_in is the convolution of d_out, padded by R-1-pad, with the kernel flipped and
  // its channels swapped: packed (r', t', k, c) = weight (k, c, R-1-r', S-1-t'), blocked by c.
  const int64_t RS = int64_t(s.R) * s.S;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < RS * s.K; ++i) {
    const int64_t rt = i / s.K, k = i % s.K;
    const int64_t r = s.R - 1 - rt / s.S, t = s.S - 1 - rt % s.S;
    for (int c = 0; c < s.C; ++c)
      packed[blocked_index(c, i, RS * s.K, s.C)] = weight[(k * s.C + c) * RS + r * s.S + t];
  }
  run_conv(d_in, d_out, packed, s.N, s.P(), s.Q(), s.K, s.C, s.R, s.S, 1, s.R - 1 - s.pad,
           accumulate);
}

void direct_conv_backward_weights(float* d_weight, const float* d_out, const float* in,
                                  const DirectConvShape& s) {
  avx512::DirectShape ds;
  ds.Hp = s.H + 2 * s.pad, ds.Wp = s.W + 2 * s.pad, ds.Cin = s.C, ds.Cout = s.K;
  ds.R = s.R, ds.S = s.S, ds.stride = s.stride, ds.P = s.P(), ds.Q = s.Q();
  const size_t count = size_t(s.K) * s.C * s.R * s.S;
  const int threads = omp_get_max_threads();
  std::vector<float*> partials(size_t(threads), nullptr);
  const int64_t in_image = int64_t(s.H) * s.W * s.C, out_image = int64_t(ds.P) * ds.Q * s.K;
  const int64_t RS = int64_t(s.R) * s.S;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    float* partial = thread_buffer(count, 1);
    partials[size_t(t)] = partial;
    std::memset(partial, 0, count * sizeof(float));
    float* img = thread_buffer(size_t(ds.Hp) * ds.Wp * s.C, 0);
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
