// Linear: forward against a naive loop, finite-difference checks of input, weight and bias.
#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "nostrum/layers/linear.hpp"

using namespace nostrum::layers;
using nostrum::testing::random_vector;

TEST_CASE("linear matches a naive reference and passes a gradient check", "[engine][linear]") {
  for (auto [N, C, K] :
       std::vector<std::array<int, 3>>{{1, 1, 1}, {1, 7, 3}, {4, 13, 10}, {3, 64, 17}}) {
    INFO("N " << N << " C " << C << " K " << K);
    auto x = random_vector(size_t(N) * C, 1 + C);
    auto wt = random_vector(size_t(K) * C, 2 + C);
    auto b = random_vector(K, 3 + C);
    std::vector<float> y(size_t(N) * K);
    linear_forward(y.data(), x.data(), wt.data(), b.data(), N, C, K);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) {
        double s = b[k];
        for (int c = 0; c < C; ++c) s += double(x[size_t(n) * C + c]) * wt[size_t(k) * C + c];
        REQUIRE(y[size_t(n) * K + k] == Approx(s).margin(1e-5));
      }
    auto w = random_vector(y.size(), 4 + C);
    std::vector<float> dx(x.size()), dw(wt.size()), db(K);
    linear_backward(dx.data(), dw.data(), db.data(), w.data(), x.data(), wt.data(), N, C, K);
    auto loss = [&] {
      std::vector<float> yy(y.size());
      linear_forward(yy.data(), x.data(), wt.data(), b.data(), N, C, K);
      return nostrum::testing::weighted_sum(yy, w);
    };
    CHECK(nostrum::testing::check_gradient("d_in", x, dx, loss, 1e-2f, 1e-3) == int(x.size()));
    CHECK(nostrum::testing::check_gradient("d_weight", wt, dw, loss, 1e-2f, 1e-3) ==
          int(wt.size()));
    CHECK(nostrum::testing::check_gradient("d_bias", b, db, loss, 1e-2f, 1e-3) == K);
  }
}
