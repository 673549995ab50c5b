// Softmax cross-entropy with label smoothing (double-precision log-sum-exp per sample, loss summed
// in sample order so it is deterministic) and top-1 counting.
#include "nostrum/layers/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::layers {

double softmax_cross_entropy(float* d_logits, const float* logits, const int32_t* labels, int n,
                             int K, float label_smoothing, float grad_scale) {
  for (int i = 0; i < n; ++i)
    NOSTRUM_CHECK(
        labels[i] >= 0 && labels[i] < K, DataError,
        "label " + std::to_string(labels[i]) + " out of range [0, " + std::to_string(K) + ")",
        "sample " + std::to_string(i) + " of the batch", "check the dataset's classes");
  const double eps = label_smoothing;
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* x = logits + static_cast<int64_t>(i) * K;
    double mx = x[0];
    for (int k = 1; k < K; ++k) mx = std::max(mx, static_cast<double>(x[k]));
    double sum_exp = 0.0, sum_x = 0.0;
    for (int k = 0; k < K; ++k) {
      sum_exp += std::exp(x[k] - mx);
      sum_x += x[k];
    }
    const double lse = mx + std::log(sum_exp);
    const double nll = lse - x[labels[i]];
    const double uniform = lse - sum_x / K;
    total += (1.0 - eps) * nll + eps * uniform;
    if (d_logits) {
      float* d = d_logits + static_cast<int64_t>(i) * K;
      for (int k = 0; k < K; ++k) {
        const double target = eps / K + (k == labels[i] ? 1.0 - eps : 0.0);
        d[k] = static_cast<float>(grad_scale * (std::exp(x[k] - lse) - target));
      }
    }
  }
  return total / n;
}

int count_top1_correct(const float* logits, const int32_t* labels, int n, int K) {
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    const float* x = logits + static_cast<int64_t>(i) * K;
    int best = 0;
    for (int k = 1; k < K; ++k)
      if (x[k] > x[best]) best = k;
    correct += best == labels[i];
  }
  return correct;
}

}  // namespace nostrum::layers
