// MaxPool2d and global average pool against naive references, PyTorch's tie and padding rules, and
// finite-difference gradient checks (max-pool inputs kept apart from their window rivals); the
// max-pool on bf16 tensors against its fp32 call.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "grad_check.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/global_avg_pool.hpp"
#include "nostrum/layers/max_pool.hpp"

using namespace nostrum::layers;
using nostrum::testing::random_vector;

namespace {

// Distinct values, spaced 0.05 apart in a random order, so no tie lies within a small FD step.
std::vector<float> distinct_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.05f * (static_cast<float>(i) - n / 2.0f);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

std::vector<float> naive_max_pool(const std::vector<float>& x, const PoolGeometry& g) {
  std::vector<float> y(size_t(g.N) * g.P() * g.Q() * g.C);
  for (int n = 0; n < g.N; ++n)
    for (int p = 0; p < g.P(); ++p)
      for (int q = 0; q < g.Q(); ++q)
        for (int c = 0; c < g.C; ++c) {
          float m = -std::numeric_limits<float>::infinity();
          for (int r = 0; r < g.R; ++r)
            for (int s = 0; s < g.S; ++s) {
              const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
              if (h < 0 || w < 0 || h >= g.H || w >= g.W) continue;
              m = std::max(m, x[((size_t(n) * g.H + h) * g.W + w) * g.C + c]);
            }
          y[((size_t(n) * g.P() + p) * g.Q() + q) * g.C + c] = m;
        }
  return y;
}

}  // namespace

TEST_CASE("max pool matches a naive reference and passes a gradient check", "[engine][pool]") {
  const std::vector<PoolGeometry> cases = {{1, 7, 7, 3, 3, 3, 2, 1},
                                           {2, 8, 6, 5, 3, 3, 2, 1},
                                           {3, 5, 9, 17, 3, 3, 2, 1},
                                           {1, 4, 4, 2, 2, 2, 2, 0},
                                           {2, 6, 5, 4, 3, 3, 1, 1},
                                           // rows 2 and 5 in no window (zeroed all the same);
                                           // 40 channels over 2 threads: 2 channel slices
                                           {2, 6, 6, 40, 2, 2, 3, 0},
                                           {1, 9, 7, 40, 3, 3, 2, 1}};
  uint32_t seed = 100;
  for (const auto& g : cases) {
    INFO("in " << g.N << "x" << g.H << "x" << g.W << "x" << g.C << " k" << g.R << " s" << g.stride);
    auto x = distinct_values(size_t(g.N) * g.H * g.W * g.C, seed++);
    const size_t out_n = size_t(g.N) * g.P() * g.Q() * g.C;
    // d_in starts as NaN: backward must overwrite every value, in a window or not (the
    // gradient check counts a NaN as a mismatch).
    std::vector<float> y(out_n), dx(x.size(), std::numeric_limits<float>::quiet_NaN());
    std::vector<int32_t> idx(out_n);
    max_pool_forward(y.data(), idx.data(), x.data(), g);
    CHECK(y == naive_max_pool(x, g));
    auto w = random_vector(out_n, seed++);
    max_pool_backward(dx.data(), w.data(), idx.data(), g);
    auto loss = [&] { return nostrum::testing::weighted_sum(naive_max_pool(x, g), w); };
    CHECK(nostrum::testing::check_gradient("max_pool d_in", x, dx, loss, 1e-3f, 1e-3) ==
          int(x.size()));
  }
}

TEST_CASE("max pool breaks ties like PyTorch and never picks padding", "[engine][pool]") {
  // A constant image: every window is a tie; PyTorch routes the gradient to the first element in
  // row-major window order. All-negative values: the -inf padding must not win.
  PoolGeometry g{1, 4, 4, 1, 3, 3, 2, 1};
  std::vector<float> x(16, -2.0f), y(4), dx(16), dy(4, 1.0f);
  std::vector<int32_t> idx(4);
  max_pool_forward(y.data(), idx.data(), x.data(), g);
  CHECK(y == std::vector<float>(4, -2.0f));
  max_pool_backward(dx.data(), dy.data(), idx.data(), g);
  // windows start at (-1,-1), (-1,1), (1,-1), (1,1): first valid elements (0,0), (0,1), (1,0),
  // (1,1)
  std::vector<float> expect(16, 0.0f);
  expect[0] = expect[1] = expect[4] = expect[5] = 1.0f;
  CHECK(dx == expect);
  // NaN propagates as in PyTorch
  x[5] = std::numeric_limits<float>::quiet_NaN();
  max_pool_forward(y.data(), idx.data(), x.data(), g);
  CHECK(std::isnan(y[0]));
}

TEST_CASE("global average pool matches a naive reference and its gradient", "[engine][pool]") {
  for (auto [N, H, W, C] :
       std::vector<std::array<int, 4>>{{1, 1, 1, 3}, {2, 3, 5, 7}, {3, 4, 4, 9}}) {
    auto x = random_vector(size_t(N) * H * W * C, 200 + C);
    std::vector<float> y(size_t(N) * C), dx(x.size());
    global_avg_pool_forward(y.data(), x.data(), N, H * W, C);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int i = 0; i < H * W; ++i) s += x[(size_t(n) * H * W + i) * C + c];
        REQUIRE(y[size_t(n) * C + c] == Approx(s / (H * W)).margin(1e-6));
      }
    auto w = random_vector(y.size(), 300 + C);
    global_avg_pool_backward(dx.data(), w.data(), N, H * W, C);
    auto loss = [&] {
      std::vector<float> yy(y.size());
      global_avg_pool_forward(yy.data(), x.data(), N, H * W, C);
      return nostrum::testing::weighted_sum(yy, w);
    };
    CHECK(nostrum::testing::check_gradient("gap d_in", x, dx, loss, 1e-2f, 1e-3) == int(x.size()));
  }
}

TEST_CASE("max pool on bf16 tensors gives the fp32 call's maxima and winners, bit for bit",
          "[engine][pool]") {
  // Values rounded to bf16 with many ties (a few distinct values), negatives (padding must not
  // win), a NaN and infinities; the fp32 call on the widened values is the reference.
  // 4,100 channels: past the kernel's 4,096-channel slice.
  const std::vector<PoolGeometry> cases = {{2, 9, 7, 40, 3, 3, 2, 1},
                                           {3, 8, 8, 64, 3, 3, 2, 1},
                                           {1, 5, 6, 3, 2, 2, 2, 0},
                                           {1, 4, 5, 4100, 3, 3, 2, 1}};
  uint32_t seed = 500;
  for (const auto& g : cases) {
    INFO("in " << g.N << "x" << g.H << "x" << g.W << "x" << g.C << " k" << g.R);
    std::vector<float> x = random_vector(size_t(g.N) * g.H * g.W * g.C, seed++);
    for (size_t i = 0; i < x.size(); ++i) {
      if (i % 3 == 0) x[i] = std::round(x[i] * 4.0f) - 3.0f;  // ties, and all-negative windows
      x[i] = nostrum::kernels::round_to_bf16(x[i]);
    }
    x[7] = std::numeric_limits<float>::quiet_NaN();
    x[11] = std::numeric_limits<float>::infinity();
    x[x.size() - 2] = -std::numeric_limits<float>::infinity();
    std::vector<uint16_t> x16(x.size());
    for (size_t i = 0; i < x.size(); ++i) x16[i] = nostrum::kernels::fp32_to_bf16(x[i]);
    const size_t out_n = size_t(g.N) * g.P() * g.Q() * g.C;
    std::vector<float> y(out_n);
    std::vector<uint16_t> y16(out_n, 0xFFFF);
    std::vector<int32_t> idx(out_n), idx16(out_n, -7);
    max_pool_forward(y.data(), idx.data(), x.data(), g);
    max_pool_forward(y16.data(), idx16.data(), x16.data(), g);
    CHECK(idx16 == idx);
    size_t differ = 0;
    for (size_t i = 0; i < out_n; ++i) {
      const float v = nostrum::kernels::bf16_to_fp32(y16[i]);
      differ += !(v == y[i] || (std::isnan(v) && std::isnan(y[i])));
    }
    CHECK(differ == 0);
  }
}

TEST_CASE("max pool past one slice of channels matches the naive reference", "[engine][pool]") {
  const PoolGeometry g{2, 5, 4, 4100, 3, 3, 2, 1};  // the kernel works in 4,096-channel slices
  const std::vector<float> x = random_vector(size_t(g.N) * g.H * g.W * g.C, 700);
  std::vector<float> y(size_t(g.N) * g.P() * g.Q() * g.C);
  std::vector<int32_t> idx(y.size());
  max_pool_forward(y.data(), idx.data(), x.data(), g);
  CHECK(y == naive_max_pool(x, g));
}
