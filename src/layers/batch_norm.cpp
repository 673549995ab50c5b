// BatchNorm2d kernels over (rows, C) NHWC data: chunked double-precision partial sums combined in a
// fixed chunk order (deterministic for any thread count), then one elementwise pass.
#include "nostrum/layers/batch_norm.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::layers {

namespace {

// Fixed number of row chunks: partial sums are per chunk, so the summation order is the same for
// any thread count.
constexpr int64_t kChunks = 64;

int64_t chunk_count(int64_t rows) {
  return std::max<int64_t>(1, std::min(kChunks, rows));
}

// partial (chunks, C) doubles; per chunk, sum over its rows of f(row, c). total (C) = ordered sum.
template <typename RowFn>
void chunked_channel_sums(double* total, double* partial, int64_t rows, int C, RowFn row_fn) {
  const int64_t chunks = chunk_count(rows);
  const int64_t per = (rows + chunks - 1) / chunks;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    double* acc = partial + k * C;
    for (int c = 0; c < C; ++c) acc[c] = 0.0;
    const int64_t r1 = std::min(rows, (k + 1) * per);
    for (int64_t r = k * per; r < r1; ++r) row_fn(acc, r);
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    double s = 0.0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
    total[c] = s;
  }
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
  // partial sums for two quantities (kChunks, C) each, plus totals (2C + 1, with the count).
  return static_cast<size_t>(kChunks) * C * 2 + 2 * static_cast<size_t>(C) + 1;
}

void batch_norm_forward_training(float* out, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var, const float* in,
                                 const float* gamma, const float* beta, int64_t rows, int C,
                                 const BatchNormOptions& options, double* scratch) {
  double* partial = scratch;                  // (kChunks, C)
  double* total = scratch + 2 * kChunks * C;  // (C + 1): sums, then the count
  // Pass 1: the mean (global over the reducer's group).
  chunked_channel_sums(total, partial, rows, C, [&](double* acc, int64_t r) {
    const float* x = in + r * C;
    for (int c = 0; c < C; ++c) acc[c] += x[c];
  });
  total[C] = static_cast<double>(rows);
  if (options.reducer) options.reducer->sum(total, C + 1);
  const double count = total[C];
  check_rows(count, C);
  for (int c = 0; c < C; ++c) save_mean[c] = static_cast<float>(total[c] / count);
  // Pass 2: the sum of squared deviations from that mean.
  chunked_channel_sums(total, partial, rows, C, [&](double* acc, int64_t r) {
    const float* x = in + r * C;
    for (int c = 0; c < C; ++c) {
      const double d = static_cast<double>(x[c]) - save_mean[c];
      acc[c] += d * d;
    }
  });
  if (options.reducer) options.reducer->sum(total, C);
  for (int c = 0; c < C; ++c) {
    const double var = total[c] / count;
    const double invstd = 1.0 / std::sqrt(var + options.eps);
    save_invstd[c] = static_cast<float>(invstd);
    const double m = options.momentum;
    running_mean[c] = static_cast<float>((1.0 - m) * running_mean[c] + m * save_mean[c]);
    running_var[c] = static_cast<float>((1.0 - m) * running_var[c] + m * var * count / (count - 1));
  }
  // Pass 3: out = (x - mean) * invstd * gamma + beta, optionally ReLU.
  const bool relu = options.fuse_relu;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * C;
    float* y = out + r * C;
    for (int c = 0; c < C; ++c) {
      float v = (x[c] - save_mean[c]) * (save_invstd[c] * gamma[c]) + beta[c];
      y[c] = relu ? std::max(v, 0.0f) : v;
    }
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
  const bool relu = options.fuse_relu;
  double* partial_dy = scratch;                 // (kChunks, C)
  double* partial_dyx = scratch + kChunks * C;  // (kChunks, C)
  double* total = scratch + 2 * kChunks * C;    // (2C + 1): sum dy, sum dy*(x-mean), count
  const int64_t chunks = chunk_count(rows);
  const int64_t per = (rows + chunks - 1) / chunks;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    double* a = partial_dy + k * C;
    double* b = partial_dyx + k * C;
    for (int c = 0; c < C; ++c) a[c] = b[c] = 0.0;
    const int64_t r1 = std::min(rows, (k + 1) * per);
    for (int64_t r = k * per; r < r1; ++r) {
      const float* dy = d_out + r * C;
      const float* x = in + r * C;
      const float* y = relu ? out + r * C : nullptr;
      for (int c = 0; c < C; ++c) {
        const float g = (relu && !(y[c] > 0.0f)) ? 0.0f : dy[c];
        a[c] += g;
        b[c] += static_cast<double>(g) * (static_cast<double>(x[c]) - save_mean[c]);
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (int c = 0; c < C; ++c) {
    double s = 0.0, t = 0.0;
    for (int64_t k = 0; k < chunks; ++k) {
      s += partial_dy[k * C + c];
      t += partial_dyx[k * C + c];
    }
    total[c] = s;
    total[C + c] = t;
    d_beta[c] = static_cast<float>(s);
    d_gamma[c] = static_cast<float>(t * save_invstd[c]);
  }
  total[2 * C] = static_cast<double>(rows);
  if (options.reducer) options.reducer->sum(total, 2 * C + 1);
  const double count = total[2 * C];
  // d_in = gamma*invstd * (dy - mean(dy) - (x-mean) * invstd^2 * mean(dy*(x-mean))), per channel
  // a = gamma*invstd, k = a*invstd^2*mean(dy*(x-mean)), b = -a*mean(dy). Reuse partial_dy as
  // floats.
  float* coef = reinterpret_cast<float*>(partial_dy);  // (3, C) floats
  for (int c = 0; c < C; ++c) {
    const double invstd = save_invstd[c];
    const double a = static_cast<double>(gamma[c]) * invstd;
    coef[c] = static_cast<float>(a);
    coef[C + c] = static_cast<float>(a * invstd * invstd * total[C + c] / count);
    coef[2 * C + c] = static_cast<float>(-a * total[c] / count);
  }
  const float* ca = coef;
  const float* ck = coef + C;
  const float* cb = coef + 2 * C;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* dy = d_out + r * C;
    const float* x = in + r * C;
    const float* y = relu ? out + r * C : nullptr;
    float* dx = d_in + r * C;
    for (int c = 0; c < C; ++c) {
      const float g = (relu && !(y[c] > 0.0f)) ? 0.0f : dy[c];
      dx[c] = ca[c] * g - ck[c] * (x[c] - save_mean[c]) + cb[c];
    }
  }
}

}  // namespace nostrum::layers
