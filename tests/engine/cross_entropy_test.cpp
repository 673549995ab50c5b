// Softmax cross-entropy with label smoothing: PyTorch's definition in double, stability with huge
// logits, finite-difference gradient, gradient scaling, bad labels, top-1 counting.
#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/layers/cross_entropy.hpp"

using namespace nostrum::layers;
using nostrum::testing::random_vector;

namespace {
// -sum_k target_k * log softmax_k with target = (1-eps) onehot + eps/K, averaged over n.
double reference_loss(const std::vector<float>& x, const std::vector<int32_t>& y, int n, int K,
                      double eps) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    double mx = -1e300, s = 0;
    for (int k = 0; k < K; ++k) mx = std::max(mx, double(x[i * K + k]));
    for (int k = 0; k < K; ++k) s += std::exp(x[i * K + k] - mx);
    for (int k = 0; k < K; ++k) {
      const double logp = x[i * K + k] - mx - std::log(s);
      total -= (eps / K + (k == y[i] ? 1 - eps : 0)) * logp;
    }
  }
  return total / n;
}
}  // namespace

TEST_CASE("cross-entropy with label smoothing matches PyTorch's definition", "[engine][loss]") {
  for (float eps : {0.0f, 0.1f}) {
    for (auto [n, K] : std::vector<std::array<int, 2>>{{1, 2}, {4, 10}, {3, 1000}}) {
      auto x = random_vector(size_t(n) * K, 7 + K, -5.0f, 5.0f);
      std::vector<int32_t> y(n);
      for (int i = 0; i < n; ++i) y[i] = (i * 7 + 3) % K;
      std::vector<float> d(x.size());
      const double loss = softmax_cross_entropy(d.data(), x.data(), y.data(), n, K, eps, 1.0f / n);
      CHECK(loss == Approx(reference_loss(x, y, n, K, eps)).epsilon(1e-6));
      auto f = [&] { return reference_loss(x, y, n, K, eps); };
      if (K <= 10)
        CHECK(nostrum::testing::check_gradient("d_logits", x, d, f, 1e-2f, 1e-3) == n * K);
      // the scale multiplies the gradient exactly
      std::vector<float> d2(x.size());
      softmax_cross_entropy(d2.data(), x.data(), y.data(), n, K, eps, 0.25f / n);
      for (size_t i = 0; i < d.size(); ++i) REQUIRE(d2[i] == Approx(0.25 * d[i]).epsilon(1e-6));
    }
  }
}

TEST_CASE("cross-entropy is stable for huge logits and rejects bad labels", "[engine][loss]") {
  std::vector<float> x = {1000.0f, -1000.0f, 0.0f, 88.0f, 89.0f, 90.0f};
  std::vector<int32_t> y = {0, 2};
  std::vector<float> d(6);
  const double loss = softmax_cross_entropy(d.data(), x.data(), y.data(), 2, 3, 0.0f, 0.5f);
  CHECK(std::isfinite(loss));
  CHECK(loss ==
        Approx((0.0 + (std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0))) / 2).epsilon(1e-6));
  for (float v : d) CHECK(std::isfinite(v));
  std::vector<int32_t> bad = {0, 3};
  CHECK_THROWS_AS(softmax_cross_entropy(d.data(), x.data(), bad.data(), 2, 3, 0.0f, 1.0f),
                  nostrum::DataError);
  CHECK_THROWS_WITH(softmax_cross_entropy(d.data(), x.data(), bad.data(), 2, 3, 0.0f, 1.0f),
                    Catch::Contains("sample 1"));
}

TEST_CASE("top-1 counting takes the first maximum", "[engine][loss]") {
  std::vector<float> x = {0.1f, 0.9f, 0.0f, 0.5f, 0.5f, 0.2f, 0.3f, 0.2f, 0.1f};
  std::vector<int32_t> y = {1, 1, 0};
  CHECK(count_top1_correct(x.data(), y.data(), 3, 3) == 2);
}
