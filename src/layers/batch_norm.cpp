// BatchNorm2d kernels over (rows, C) NHWC data. Statistics: 64 fixed row chunks, each summing its
// rows in fp32 over 16-row blocks flushed into double accumulators, chunks combined in a fixed order
// (deterministic for any thread count). The row kernels are compiled for AVX-512, AVX2 and the
// baseline, picked at run time.
#include "nostrum/layers/batch_norm.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "nostrum/core/error.hpp"

#define NOSTRUM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace nostrum::layers {

namespace {

constexpr int64_t kChunks = 64;    // partial sums per chunk: same order for any thread count
constexpr int64_t kFlushRows = 16; // fp32 accumulation over at most this many rows

int64_t chunk_count(int64_t rows) { return std::max<int64_t>(1, std::min(kChunks, rows)); }

// acc (C) += sum over rows of x (rows,C); f (C) is fp32 scratch.
NOSTRUM_CLONES void sum_rows(double* acc, float* f, const float* x, int64_t rows, int C) {
  for (int64_t r0 = 0; r0 < rows; r0 += kFlushRows) {
    const int64_t r1 = std::min(rows, r0 + kFlushRows);
    for (int c = 0; c < C; ++c) f[c] = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < C; ++c) f[c] += x[r * C + c];
    for (int c = 0; c < C; ++c) acc[c] += f[c];
  }
}

// acc (C) += sum over rows of (x - mean)^2.
NOSTRUM_CLONES void sum_sq_dev_rows(double* acc, float* f, const float* x, const float* mean,
                                    int64_t rows, int C) {
  for (int64_t r0 = 0; r0 < rows; r0 += kFlushRows) {
    const int64_t r1 = std::min(rows, r0 + kFlushRows);
    for (int c = 0; c < C; ++c) f[c] = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < C; ++c) {
        const float d = x[r * C + c] - mean[c];
        f[c] += d * d;
      }
    for (int c = 0; c < C; ++c) acc[c] += f[c];
  }
}

// y = (x - mean) * scale + beta, optionally ReLU.
template <bool kRelu>
NOSTRUM_CLONES void normalize_rows(float* y, const float* x, const float* mean, const float* scale,
                                   const float* beta, int64_t rows, int C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      const float v = (x[r * C + c] - mean[c]) * scale[c] + beta[c];
      y[r * C + c] = kRelu ? std::max(v, 0.0f) : v;
    }
}

// sum_dy (C) += sum g, sum_dyx (C) += sum g * (x - mean), g = dy masked by y > 0 when kRelu.
template <bool kRelu>
NOSTRUM_CLONES void grad_sums_rows(double* sum_dy, double* sum_dyx, float* f, const float* dy,
                                   const float* x, const float* y, const float* mean, int64_t rows,
                                   int C) {
  float* fa = f;
  float* fb = f + C;
  for (int64_t r0 = 0; r0 < rows; r0 += kFlushRows) {
    const int64_t r1 = std::min(rows, r0 + kFlushRows);
    for (int c = 0; c < C; ++c) fa[c] = fb[c] = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int c = 0; c < C; ++c) {
        const float g = (!kRelu || y[r * C + c] > 0.0f) ? dy[r * C + c] : 0.0f;
        fa[c] += g;
        fb[c] += g * (x[r * C + c] - mean[c]);
      }
    for (int c = 0; c < C; ++c) {
      sum_dy[c] += fa[c];
      sum_dyx[c] += fb[c];
    }
  }
}

// dx = ca * g - ck * (x - mean) + cb (g as above); dx may alias dy.
template <bool kRelu>
NOSTRUM_CLONES void grad_input_rows(float* dx, const float* dy, const float* x, const float* y,
                                    const float* mean, const float* ca, const float* ck,
                                    const float* cb, int64_t rows, int C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < C; ++c) {
      const float g = (!kRelu || y[r * C + c] > 0.0f) ? dy[r * C + c] : 0.0f;
      dx[r * C + c] = ca[c] * g - ck[c] * (x[r * C + c] - mean[c]) + cb[c];
    }
}

// Scratch layout (doubles): partial A (kChunks,C) | partial B (kChunks,C) | fp32 area (kChunks,2C
// floats = kChunks*C doubles) | totals (2C+1) | per-channel float coefficients (4C floats = 2C).
struct Scratch {
  double* partial_a;
  double* partial_b;
  float* f32;
  double* total;
  float* coef;
  Scratch(double* s, int C)
      : partial_a(s),
        partial_b(s + kChunks * C),
        f32(reinterpret_cast<float*>(s + 2 * kChunks * C)),
        total(s + 3 * kChunks * C),
        coef(reinterpret_cast<float*>(s + 3 * kChunks * C + 2 * C + 1)) {}
};

// Row range of chunk k.
void chunk_rows(int64_t rows, int64_t chunks, int64_t k, int64_t* r0, int64_t* r1) {
  const int64_t per = (rows + chunks - 1) / chunks;
  *r0 = std::min(rows, k * per);
  *r1 = std::min(rows, (k + 1) * per);
}

void check_rows(double count, int C) {
  NOSTRUM_CHECK(count >= 2, ShapeError,
                "batch norm needs at least 2 values per channel in training, got " +
                    std::to_string(static_cast<long long>(count)),
                "batch_norm over " + std::to_string(C) + " channels",
                "use a larger batch or spatial size");
}

}  // namespace

size_t batch_norm_scratch_doubles(int C) {
  return static_cast<size_t>(kChunks) * C * 3 + 2 * static_cast<size_t>(C) + 1 +
         2 * static_cast<size_t>(C);
}

void batch_norm_forward_training(float* out, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var, const float* in,
                                 const float* gamma, const float* beta, int64_t rows, int C,
                                 const BatchNormOptions& options, double* scratch) {
  Scratch s(scratch, C);
  const int64_t chunks = chunk_count(rows);
  // Pass 1: the mean (global over the reducer's group; the row count is summed too).
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t r0, r1;
    chunk_rows(rows, chunks, k, &r0, &r1);
    double* acc = s.partial_a + k * C;
    std::fill(acc, acc + C, 0.0);
    sum_rows(acc, s.f32 + k * 2 * C, in + r0 * C, r1 - r0, C);
  }
  for (int c = 0; c < C; ++c) {
    double t = 0.0;
    for (int64_t k = 0; k < chunks; ++k) t += s.partial_a[k * C + c];
    s.total[c] = t;
  }
  s.total[C] = static_cast<double>(rows);
  if (options.reducer) options.reducer->sum(s.total, C + 1);
  const double count = s.total[C];
  check_rows(count, C);
  for (int c = 0; c < C; ++c) save_mean[c] = static_cast<float>(s.total[c] / count);
  // Pass 2: the sum of squared deviations from that mean.
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t r0, r1;
    chunk_rows(rows, chunks, k, &r0, &r1);
    double* acc = s.partial_a + k * C;
    std::fill(acc, acc + C, 0.0);
    sum_sq_dev_rows(acc, s.f32 + k * 2 * C, in + r0 * C, save_mean, r1 - r0, C);
  }
  for (int c = 0; c < C; ++c) {
    double t = 0.0;
    for (int64_t k = 0; k < chunks; ++k) t += s.partial_a[k * C + c];
    s.total[c] = t;
  }
  if (options.reducer) options.reducer->sum(s.total, C);
  float* scale = s.coef;
  for (int c = 0; c < C; ++c) {
    const double var = s.total[c] / count;
    const double invstd = 1.0 / std::sqrt(var + options.eps);
    save_invstd[c] = static_cast<float>(invstd);
    scale[c] = static_cast<float>(invstd * gamma[c]);
    const double m = options.momentum;
    running_mean[c] = static_cast<float>((1.0 - m) * running_mean[c] + m * save_mean[c]);
    running_var[c] = static_cast<float>((1.0 - m) * running_var[c] + m * var * count / (count - 1));
  }
  // Pass 3: out = (x - mean) * invstd * gamma + beta, optionally ReLU.
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t r0, r1;
    chunk_rows(rows, chunks, k, &r0, &r1);
    if (options.fuse_relu)
      normalize_rows<true>(out + r0 * C, in + r0 * C, save_mean, scale, beta, r1 - r0, C);
    else
      normalize_rows<false>(out + r0 * C, in + r0 * C, save_mean, scale, beta, r1 - r0, C);
  }
}

void batch_norm_forward_inference(float* out, const float* in, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, int64_t rows, int C,
                                  const BatchNormOptions& options) {
  const bool relu = options.fuse_relu;
  const float eps = options.eps;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * C;
    float* y = out + r * C;
    for (int c = 0; c < C; ++c) {
      const float invstd = 1.0f / std::sqrt(running_var[c] + eps);
      float v = (x[c] - running_mean[c]) * (invstd * gamma[c]) + beta[c];
      y[c] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

void batch_norm_backward(float* d_in, float* d_gamma, float* d_beta, const float* d_out,
                         const float* in, const float* out, const float* gamma,
                         const float* save_mean, const float* save_invstd, int64_t rows, int C,
                         const BatchNormOptions& options, double* scratch) {
  Scratch s(scratch, C);
  const bool relu = options.fuse_relu;
  const int64_t chunks = chunk_count(rows);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t r0, r1;
    chunk_rows(rows, chunks, k, &r0, &r1);
    double* a = s.partial_a + k * C;
    double* b = s.partial_b + k * C;
    std::fill(a, a + C, 0.0);
    std::fill(b, b + C, 0.0);
    float* f = s.f32 + k * 2 * C;
    if (relu)
      grad_sums_rows<true>(a, b, f, d_out + r0 * C, in + r0 * C, out + r0 * C, save_mean, r1 - r0, C);
    else
      grad_sums_rows<false>(a, b, f, d_out + r0 * C, in + r0 * C, nullptr, save_mean, r1 - r0, C);
  }
  double* total = s.total;  // sum dy (C) | sum dy*(x-mean) (C) | count
  for (int c = 0; c < C; ++c) {
    double sa = 0.0, sb = 0.0;
    for (int64_t k = 0; k < chunks; ++k) {
      sa += s.partial_a[k * C + c];
      sb += s.partial_b[k * C + c];
    }
    total[c] = sa;
    total[C + c] = sb;
    d_beta[c] = static_cast<float>(sa);
    d_gamma[c] = static_cast<float>(sb * save_invstd[c]);
  }
  total[2 * C] = static_cast<double>(rows);
  if (options.reducer) options.reducer->sum(total, 2 * C + 1);
  const double count = total[2 * C];
  // d_in = gamma*invstd * (g - mean(g) - (x-mean) * invstd^2 * mean(g*(x-mean))), per channel
  // ca = gamma*invstd, ck = ca*invstd^2*mean(g*(x-mean)), cb = -ca*mean(g).
  float* ca = s.coef;
  float* ck = s.coef + C;
  float* cb = s.coef + 2 * C;
  for (int c = 0; c < C; ++c) {
    const double invstd = save_invstd[c];
    const double a = static_cast<double>(gamma[c]) * invstd;
    ca[c] = static_cast<float>(a);
    ck[c] = static_cast<float>(a * invstd * invstd * total[C + c] / count);
    cb[c] = static_cast<float>(-a * total[c] / count);
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t r0, r1;
    chunk_rows(rows, chunks, k, &r0, &r1);
    if (relu)
      grad_input_rows<true>(d_in + r0 * C, d_out + r0 * C, in + r0 * C, out + r0 * C, save_mean,
                            ca, ck, cb, r1 - r0, C);
    else
      grad_input_rows<false>(d_in + r0 * C, d_out + r0 * C, in + r0 * C, nullptr, save_mean, ca,
                             ck, cb, r1 - r0, C);
  }
}

}  // namespace nostrum::layers
