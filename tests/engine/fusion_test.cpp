// Fused kernels against the unfused chains they replace, bit for bit: BN + shortcut add (+ ReLU) in
// one pass, in training and in eval mode; a block's add + ReLU backward with its norms' first
// backward pass.
#include <catch2/catch.hpp>

#include <omp.h>

#include <random>
#include <vector>

#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/batch_norm.hpp"
#include "nostrum/layers/residual_add.hpp"

namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A batch norm that reads a block's add + ReLU gradient: its input (fp32, and the same values in
// bf16), gamma and its batch statistics from a training forward.
struct ReaderNorm {
  std::vector<float> x, gamma, mean, invstd;
  std::vector<uint16_t> x_bf16;
  ReaderNorm(int64_t rows, int C, std::mt19937& rng) {
    namespace L = nostrum::layers;
    const size_t n = size_t(rows) * C;
    x = random_vector(n, rng, -3.0f, 5.0f);
    x_bf16.resize(n);
    for (size_t i = 0; i < n; ++i) x_bf16[i] = nostrum::kernels::fp32_to_bf16(x[i]);
    gamma = random_vector(C, rng, 0.5f, 1.5f);
    mean.resize(C), invstd.resize(C);
    std::vector<float> y(n), rm(C, 0.0f), rv(C, 1.0f), beta(C, 0.0f);
    std::vector<double> scratch(L::batch_norm_scratch_doubles(C));
    L::batch_norm_forward_training(y.data(), mean.data(), invstd.data(), rm.data(), rv.data(),
                                   x.data(), gamma.data(), beta.data(), rows, C,
                                   L::BatchNormOptions{}, scratch.data());
  }
  // Its request for the add's backward: the input in bf16 or fp32, the sums written to `sums`.
  nostrum::layers::NormSumsRequest request(bool bf16, double* sums) const {
    nostrum::layers::NormSumsRequest r;
    r.in = bf16 ? nullptr : x.data();
    r.in_bf16 = bf16 ? x_bf16.data() : nullptr;
    r.save_mean = mean.data();
    r.sums = sums;
    return r;
  }
  // Its backward on `fused` given `sums` as its first pass gives the bits of its backward on
  // `chain` (the unfused add + ReLU backward's gradient) taking its own first pass.
  void require_backward_matches(const std::vector<float>& chain, const std::vector<float>& fused,
                                const double* sums, int64_t rows, int C, bool bf16) const {
    namespace L = nostrum::layers;
    const size_t n = chain.size();
    std::vector<double> scratch(L::batch_norm_scratch_doubles(C));
    std::vector<float> dx_a(n), dg_a(C), db_a(C), dx_b(n), dg_b(C), db_b(C);
    L::BatchNormOptions o;
    o.in_bf16 = bf16 ? x_bf16.data() : nullptr;
    const float* in = bf16 ? nullptr : x.data();
    L::batch_norm_backward(dx_a.data(), dg_a.data(), db_a.data(), chain.data(), in, nullptr,
                           gamma.data(), mean.data(), invstd.data(), rows, C, o, scratch.data());
    o.first_pass_sums = sums;
    L::batch_norm_backward(dx_b.data(), dg_b.data(), db_b.data(), fused.data(), in, nullptr,
                           gamma.data(), mean.data(), invstd.data(), rows, C, o, scratch.data());
    REQUIRE(dx_b == dx_a);
    REQUIRE(dg_b == dg_a);
    REQUIRE(db_b == db_a);
  }
};

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

TEST_CASE(
    "a block's add + ReLU backward running its norms' first pass equals the unfused chain bit for "
    "bit",
    "[fusion]") {
  namespace L = nostrum::layers;
  namespace K = nostrum::kernels;
  std::mt19937 rng(12);
  const int threads_before = omp_get_max_threads();
  // Rows that end chunks, 128-row pieces and 16-row float partials mid-way; C not a lane multiple.
  for (const auto& [rows, C] :
       {std::pair<int64_t, int>{37, 5}, {3000, 64}, {20011, 24}, {3, 130}}) {
    const size_t n = size_t(rows) * C;
    const auto d = random_vector(n, rng, -1.0f, 1.0f);
    const auto out = random_vector(n, rng, -1.0f, 1.0f);  // the block output: only its sign is read
    std::vector<uint16_t> out_bf16(n);
    for (size_t i = 0; i < n; ++i) out_bf16[i] = K::fp32_to_bf16(out[i]);
    const ReaderNorm norms[2] = {ReaderNorm(rows, C, rng), ReaderNorm(rows, C, rng)};
    for (int threads : {1, 2})
      for (int count : {1, 2})
        for (bool bf16 : {false, true}) {
          omp_set_num_threads(threads);
          INFO("rows " << rows << " C " << C << " threads " << threads << " norms " << count
                       << " bf16 operands " << bf16);
          std::vector<float> chain(d), fused(d);
          L::add_relu_backward(chain.data(), chain.data(), out.data(), int64_t(n));
          std::vector<std::vector<double>> sums(
              count, std::vector<double>(L::batch_norm_backward_sums_doubles(C)));
          L::NormSumsRequest requests[2];
          for (int i = 0; i < count; ++i) requests[i] = norms[i].request(bf16, sums[i].data());
          L::add_relu_backward_with_norm_sums(fused.data(), bf16 ? nullptr : out.data(),
                                              bf16 ? out_bf16.data() : nullptr, rows, C, requests,
                                              count);
          if (bf16) {  // the mask of the bf16 output: the same chain on it
            chain = d;
            L::add_relu_backward(chain.data(), chain.data(), out_bf16.data(), int64_t(n));
          }
          REQUIRE(fused == chain);
          for (int i = 0; i < count; ++i)
            norms[i].require_backward_matches(chain, fused, sums[i].data(), rows, C, bf16);
        }
  }
  omp_set_num_threads(threads_before);
  std::vector<double> sums(L::batch_norm_backward_sums_doubles(4));
  std::vector<float> g(8, 1.0f), y(8, 1.0f), x(8, 0.0f), mean(4, 0.0f);
  L::NormSumsRequest r[3];
  for (auto& q : r) q.in = x.data(), q.save_mean = mean.data(), q.sums = sums.data();
  REQUIRE_THROWS_AS(L::add_relu_backward_with_norm_sums(g.data(), y.data(), nullptr, 2, 4, r, 3),
                    nostrum::ShapeError);
}

TEST_CASE(
    "the add + ReLU backward over rows in pieces, partials added, equals the add then the unfused "
    "chain bit for bit",
    "[fusion]") {
  // A backward-data kernel hands the rows of the block output's gradient over as they become
  // final, with the partial it would have added: pieces that end inside 16-row blocks, inside row
  // chunks and across several; more threads than the chunks a piece touches (channel slices).
  namespace L = nostrum::layers;
  namespace K = nostrum::kernels;
  std::mt19937 rng(13);
  const int threads_before = omp_get_max_threads();
  for (const auto& [rows, C] : {std::pair<int64_t, int>{3000, 64}, {20011, 24}, {37, 5}, {640, 40}})
    for (int threads : {1, 2, 5})
      for (int count : {0, 1, 2})
        for (bool bf16 : {false, true}) {
          omp_set_num_threads(threads);
          const size_t n = size_t(rows) * C;
          const auto d = random_vector(n, rng, -1.0f, 1.0f);
          const auto add = random_vector(n, rng, -1.0f, 1.0f);
          const auto out = random_vector(n, rng, -1.0f, 1.0f);
          std::vector<uint16_t> out_bf16(n);
          for (size_t i = 0; i < n; ++i) out_bf16[i] = K::fp32_to_bf16(out[i]);
          // Cut points: random, some one row apart, the last the end.
          std::vector<int64_t> cuts;
          for (int64_t r = 0; r < rows;) {
            r = std::min<int64_t>(rows, r + 1 + int64_t(rng() % uint32_t(rows / 7 + 2)));
            cuts.push_back(r);
          }
          INFO("rows " << rows << " C " << C << " threads " << threads << " norms " << count
                       << " bf16 operands " << bf16 << " pieces " << cuts.size());
          const ReaderNorm norms[2] = {ReaderNorm(rows, C, rng), ReaderNorm(rows, C, rng)};
          std::vector<double> sums[2];
          L::NormSumsRequest requests[2];
          for (int i = 0; i < count; ++i) {
            sums[i].assign(L::batch_norm_backward_sums_doubles(C), -1.0);
            requests[i] = norms[i].request(bf16, sums[i].data());
          }
          std::vector<float> fused(d), chain(d);
          L::AddReluBackward backward(fused.data(), bf16 ? nullptr : out.data(),
                                      bf16 ? out_bf16.data() : nullptr, rows, C, requests, count);
          REQUIRE(backward.rows() == rows);
          int64_t r0 = 0;
          for (size_t i = 0; i < cuts.size(); ++i) {
            const bool with_add = i % 3 != 2;  // some pieces already summed in place
            if (!with_add)
              for (int64_t j = r0 * C; j < cuts[i] * C; ++j) fused[size_t(j)] += add[size_t(j)];
            backward.finish(with_add ? add.data() + r0 * C : nullptr, r0, cuts[i]);
            r0 = cuts[i];
          }
          for (size_t i = 0; i < n; ++i) chain[i] += add[i];
          if (bf16)
            L::add_relu_backward(chain.data(), chain.data(), out_bf16.data(), int64_t(n));
          else
            L::add_relu_backward(chain.data(), chain.data(), out.data(), int64_t(n));
          REQUIRE(fused == chain);
          for (int i = 0; i < count; ++i)
            norms[i].require_backward_matches(chain, fused, sums[i].data(), rows, C, bf16);
        }
  omp_set_num_threads(threads_before);
  // Rows out of order, or past the end, are refused by name.
  std::vector<float> g(40, 1.0f), y(40, 1.0f);
  L::AddReluBackward backward(g.data(), y.data(), nullptr, 10, 4, nullptr, 0);
  backward.finish(nullptr, 0, 4);
  REQUIRE_THROWS_AS(backward.finish(nullptr, 5, 8), nostrum::ShapeError);
  REQUIRE_THROWS_AS(backward.finish(nullptr, 4, 11), nostrum::ShapeError);
  REQUIRE_THROWS_AS(L::AddReluBackward(g.data(), y.data(), nullptr, 10, 4, nullptr, 3),
                    nostrum::ShapeError);
}
