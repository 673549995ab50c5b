// ReLU and the residual add (+ fused ReLU): naive references, kink-aware finite differences, and
// the fused add+ReLU against the unfused chain; its backward's mask read from a bf16 output.
#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/relu.hpp"
#include "nostrum/layers/residual_add.hpp"

using namespace nostrum::layers;
using nostrum::testing::random_vector;

TEST_CASE("relu forward, backward and gradient check away from the kink", "[engine][relu]") {
  for (int n : {1, 7, 129}) {
    auto x = random_vector(n, 40 + n);
    std::vector<float> y(n), dx(n);
    relu_forward(y.data(), x.data(), n);
    for (int i = 0; i < n; ++i) REQUIRE(y[i] == std::max(x[i], 0.0f));
    auto w = random_vector(n, 50 + n);
    relu_backward(dx.data(), w.data(), y.data(), n);
    auto loss = [&] {
      std::vector<float> yy(n);
      relu_forward(yy.data(), x.data(), n);
      return nostrum::testing::weighted_sum(yy, w);
    };
    const float step = 1e-3f;
    nostrum::testing::check_gradient("relu d_in", x, dx, loss, step, 1e-3,
                                     [&](size_t i) { return std::abs(x[i]) < 2 * step; });
  }
  // at exactly 0 the subgradient is 0, as PyTorch's
  std::vector<float> x = {0.0f}, y(1), dx(1), d = {1.0f};
  relu_forward(y.data(), x.data(), 1);
  relu_backward(dx.data(), d.data(), y.data(), 1);
  CHECK(dx[0] == 0.0f);
}

TEST_CASE("residual add and fused add+relu", "[engine][relu]") {
  const int n = 131;
  auto a = random_vector(n, 60), b = random_vector(n, 61), dy = random_vector(n, 62);
  std::vector<float> s(n), r(n), fused(n), d1(n), d2(n);
  residual_add_forward(s.data(), a.data(), b.data(), n, false);
  for (int i = 0; i < n; ++i) REQUIRE(s[i] == a[i] + b[i]);
  relu_forward(r.data(), s.data(), n);
  residual_add_forward(fused.data(), a.data(), b.data(), n, true);
  CHECK(fused == r);
  relu_backward(d1.data(), dy.data(), r.data(), n);
  add_relu_backward(d2.data(), dy.data(), fused.data(), n);
  CHECK(d1 == d2);
  // gradient wrt each addend by finite differences (kinks skipped)
  auto loss = [&] {
    std::vector<float> yy(n);
    residual_add_forward(yy.data(), a.data(), b.data(), n, true);
    return nostrum::testing::weighted_sum(yy, dy);
  };
  nostrum::testing::check_gradient("d_a", a, d2, loss, 1e-3f, 1e-3,
                                   [&](size_t i) { return std::abs(a[i] + b[i]) < 2e-3; });
  nostrum::testing::check_gradient("d_b", b, d2, loss, 1e-3f, 1e-3,
                                   [&](size_t i) { return std::abs(a[i] + b[i]) < 2e-3; });
  std::vector<float> acc = a;
  accumulate(acc.data(), b.data(), n);
  CHECK(acc == s);
}

TEST_CASE("add+relu backward reads a bf16 output as its fp32 value", "[engine][relu]") {
  // The bf16 residual stream's mask: the output kept in bf16 masks exactly where its widened value
  // does (zeros, negatives, positives and a subnormal that bf16 keeps).
  const int n = 1031;
  auto out = random_vector(n, 63);
  for (int i = 0; i < n; i += 5) out[i] = 0.0f;
  out[7] = 1e-40f;
  auto dy = random_vector(n, 64);
  std::vector<uint16_t> out_bf16(n);
  std::vector<float> widened(n), expect(n), got(n, -7.0f);
  for (int i = 0; i < n; ++i) {
    out_bf16[i] = nostrum::kernels::fp32_to_bf16(out[i]);
    widened[i] = nostrum::kernels::bf16_to_fp32(out_bf16[i]);
  }
  add_relu_backward(expect.data(), dy.data(), widened.data(), n);
  add_relu_backward(got.data(), dy.data(), out_bf16.data(), n);
  CHECK(got == expect);
  CHECK(got[7] == dy[7]);  // the subnormal is positive in bf16 too
  CHECK(got[0] == 0.0f);
  // In place, as the model calls it.
  std::vector<float> d = dy;
  add_relu_backward(d.data(), d.data(), out_bf16.data(), n);
  CHECK(d == expect);
}
