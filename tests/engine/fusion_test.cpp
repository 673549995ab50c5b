// Fused kernels against the unfused chains they replace, bit for bit: BN + shortcut add (+ ReLU) in
// one pass, in training and in eval mode.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "nostrum/layers/batch_norm.hpp"
#include "nostrum/layers/residual_add.hpp"

namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("batch norm + residual add (+ ReLU) in one pass equals the unfused chain bit for bit",
          "[fusion]") {
  namespace L = nostrum::layers;
  std::mt19937 rng(11);
  for (const auto& [rows, C] : {std::pair<int64_t, int>{37, 5}, {200, 64}, {3, 130}}) {
    const auto x = random_vector(size_t(rows) * C, rng, -3.0f, 5.0f);
    const auto z = random_vector(size_t(rows) * C, rng, -2.0f, 2.0f);
    const auto gamma = random_vector(C, rng, 0.5f, 1.5f);
    const auto beta = random_vector(C, rng, -0.5f, 0.5f);
    const auto running_var = random_vector(C, rng, 0.5f, 2.0f);
    std::vector<double> scratch(L::batch_norm_scratch_doubles(C));
    std::vector<float> invstd(C);  // eval's scratch
    for (bool relu : {false, true}) {
      for (bool training : {true, false}) {
        std::vector<float> fused(x.size()), chain(x.size());
        std::vector<float> mean_a(C), invstd_a(C), rm_a(C, 0.1f), rv_a(running_var);
        std::vector<float> mean_b(C), invstd_b(C), rm_b(C, 0.1f), rv_b(running_var);
        L::BatchNormOptions plain;
        L::BatchNormOptions fused_options;
        fused_options.fuse_relu = relu;
        fused_options.residual = z.data();
        if (training) {
          L::batch_norm_forward_training(fused.data(), mean_a.data(), invstd_a.data(), rm_a.data(),
                                         rv_a.data(), x.data(), gamma.data(), beta.data(), rows, C,
                                         fused_options, scratch.data());
          L::batch_norm_forward_training(chain.data(), mean_b.data(), invstd_b.data(), rm_b.data(),
                                         rv_b.data(), x.data(), gamma.data(), beta.data(), rows, C,
                                         plain, scratch.data());
          REQUIRE(mean_a == mean_b);
          REQUIRE(invstd_a == invstd_b);
          REQUIRE(rm_a == rm_b);
          REQUIRE(rv_a == rv_b);
        } else {
          L::batch_norm_forward_inference(fused.data(), x.data(), gamma.data(), beta.data(),
                                          rm_a.data(), rv_a.data(), rows, C, fused_options,
                                          invstd.data());
          L::batch_norm_forward_inference(chain.data(), x.data(), gamma.data(), beta.data(),
                                          rm_b.data(), rv_b.data(), rows, C, plain, invstd.data());
        }
        L::residual_add_forward(chain.data(), chain.data(), z.data(), rows * C, relu);
        INFO("rows " << rows << " C " << C << " relu " << relu << " training " << training);
        REQUIRE(fused == chain);
        bool any_clipped = false;
        for (float v : fused) any_clipped |= (v == 0.0f);
        REQUIRE(any_clipped == relu);  // the data straddles 0, so ReLU must have bitten
      }
    }
  }
}
