// The batch norm's row kernels give the same bits in every ISA copy this CPU runs (baseline, avx2,
// avx512: the AVX-512 one written in intrinsics, src/layers/batch_norm_avx512.hpp, the others
// compiled from the portable bodies): the training and eval forwards, the backward and the add +
// ReLU backward with its norms' sums, over fp32 and bf16 operands, channel counts with partial
// vectors and partial register groups, 1 and 2 threads.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/batch_norm.hpp"

namespace {

namespace L = nostrum::layers;
using nostrum::Isa;

std::vector<float> values(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = nostrum::kernels::fp32_to_bf16(v[i]);
  return b;
}

// Every output of one run of the kernels, named.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<unsigned char>> bytes;
  template <typename T>
  void add(const std::string& name, const std::vector<T>& v) {
    names.push_back(name);
    bytes.emplace_back(v.size() * sizeof(T));
    std::memcpy(bytes.back().data(), v.data(), bytes.back().size());
  }
};

// The forwards, backwards and add + ReLU backwards over a (rows, C) shape in every operand form.
Outputs run_kernels(int64_t rows, int C, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t n = size_t(rows) * C;
  const std::vector<float> x = values(n, rng, -3.0f, 5.0f), z = values(n, rng, -2.0f, 2.0f);
  const std::vector<uint16_t> x_bf16 = to_bf16(x), z_bf16 = to_bf16(z);
  const std::vector<float> gamma = values(C, rng, 0.5f, 1.5f), beta = values(C, rng, -0.5f, 0.5f);
  std::vector<float> dy = values(n, rng, -1.0f, 1.0f), add = values(n, rng, -1.0f, 1.0f);
  for (size_t i = 0; i < n; i += 7) dy[i] = -0.0f;  // the mask's and the sums' signed zeros
  std::vector<double> scratch(L::batch_norm_scratch_doubles(C));
  Outputs o;
  std::vector<float> mean(C), invstd(C);
  for (bool in_bf16 : {false, true})
    for (bool out_bf16 : {false, true})
      for (int residual : {0, 1, 2})  // none, fp32, bf16
        for (bool relu : {false, true}) {
          const std::string tag = std::string(in_bf16 ? "bf16" : "fp32") + " in, " +
                                  (out_bf16 ? "bf16" : "fp32") + " out, residual " +
                                  std::to_string(residual) + (relu ? ", relu" : "");
          L::BatchNormOptions f;
          f.fuse_relu = relu;
          f.in_bf16 = in_bf16 ? x_bf16.data() : nullptr;
          std::vector<float> out(n), rm(C, 0.1f), rv(C, 0.9f);
          std::vector<uint16_t> out_b(out_bf16 ? n : 0);
          f.out_bf16 = out_bf16 ? out_b.data() : nullptr;
          f.residual = residual == 1 ? z.data() : nullptr;
          f.residual_bf16 = residual == 2 ? z_bf16.data() : nullptr;
          L::batch_norm_forward_training(out.data(), mean.data(), invstd.data(), rm.data(),
                                         rv.data(), x.data(), gamma.data(), beta.data(), rows, C, f,
                                         scratch.data());
          o.add("forward " + tag, out_bf16 ? std::vector<float>() : out);
          o.add("forward bf16 " + tag, out_b);
          o.add("mean " + tag, mean);
          o.add("invstd " + tag, invstd);
          o.add("running var " + tag, rv);
          if (residual != 0) continue;
          // Its backward: d_in in the output's precision, the mask from the output as kept.
          L::BatchNormOptions b;
          b.fuse_relu = relu;
          b.in_bf16 = f.in_bf16;
          b.out_bf16 = f.out_bf16;
          std::vector<float> d_in(n), d_gamma(C), d_beta(C);
          std::vector<uint16_t> d_in_b(out_bf16 ? n : 0);
          b.d_in_bf16 = out_bf16 ? d_in_b.data() : nullptr;
          L::batch_norm_backward(d_in.data(), d_gamma.data(), d_beta.data(), dy.data(), x.data(),
                                 out.data(), gamma.data(), mean.data(), invstd.data(), rows, C, b,
                                 scratch.data());
          o.add("backward d_in " + tag, out_bf16 ? std::vector<float>() : d_in);
          o.add("backward d_in bf16 " + tag, d_in_b);
          o.add("backward d_gamma " + tag, d_gamma);
          o.add("backward d_beta " + tag, d_beta);
        }
  {
    std::vector<float> out(n), inv_scratch(C);
    L::batch_norm_forward_inference(out.data(), x.data(), gamma.data(), beta.data(), mean.data(),
                                    invstd.data(), rows, C, L::BatchNormOptions{},
                                    inv_scratch.data());
    o.add("eval forward", out);
  }
  // The add + ReLU backward, 0-2 norms, in two pieces with partials and in one without.
  const std::vector<float> x2 = values(n, rng, -1.0f, 3.0f);
  const std::vector<uint16_t> x2_bf16 = to_bf16(x2);
  const std::vector<float> mean2 = values(C, rng, 0.0f, 1.0f);
  for (bool bf16 : {false, true})
    for (int norms = 0; norms <= 2; ++norms)
      for (bool pieces : {false, true}) {
        const std::string tag = std::string(bf16 ? "bf16" : "fp32") + " operands, " +
                                std::to_string(norms) + " norms" + (pieces ? ", in pieces" : "");
        std::vector<std::vector<double>> sums(
            2, std::vector<double>(L::batch_norm_backward_sums_doubles(C)));
        L::NormSumsRequest r[2];
        r[0].in = bf16 ? nullptr : x.data();
        r[0].in_bf16 = bf16 ? x_bf16.data() : nullptr;
        r[0].save_mean = mean.data();
        r[1].in = bf16 ? nullptr : x2.data();
        r[1].in_bf16 = bf16 ? x2_bf16.data() : nullptr;
        r[1].save_mean = mean2.data();
        for (int i = 0; i < 2; ++i) r[i].sums = sums[i].data();
        std::vector<float> d_sum = dy;
        L::AddReluBackward backward(d_sum.data(), bf16 ? nullptr : z.data(),
                                    bf16 ? z_bf16.data() : nullptr, rows, C, r, norms);
        if (pieces) {
          const int64_t cut = rows / 3 + 5;  // inside a 16-row block
          backward.finish(add.data(), 0, cut);
          backward.finish(add.data() + cut * C, cut, rows);
        } else {
          backward.finish(nullptr, 0, rows);
        }
        o.add("add backward d_sum " + tag, d_sum);
        for (int i = 0; i < norms; ++i)
          o.add("add backward sums " + std::to_string(i) + " " + tag, sums[i]);
      }
  return o;
}

}  // namespace

TEST_CASE("the batch norm's row kernels give the same bits in every ISA copy",
          "[engine][batch_norm][isa_dispatch]") {
  INFO(nostrum::cpu_features().describe());
  const Isa top = nostrum::elementwise_isa();
  std::vector<Isa> copies = {Isa::kBaseline};
  if (top >= Isa::kAvx2) copies.push_back(Isa::kAvx2);
  if (top >= Isa::kAvx512) copies.push_back(Isa::kAvx512);
  const int threads_before = omp_get_max_threads();
  nostrum::reset_dispatch_record();
  // 16 channels (one vector), 24 (one and a partial one), 80 (a register group of 4 and one more),
  // 100 (partial vector in a partial group), 256 and 2048.
  const std::pair<int64_t, int> shapes[] = {{37, 16},   {50, 24},  {41, 80},
                                            {130, 100}, {20, 256}, {18, 2048}};
  for (const auto& [rows, C] : shapes)
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      INFO("rows " << rows << " C " << C << " threads " << threads);
      Outputs reference;
      {
        nostrum::ScopedElementwiseIsa copy(Isa::kBaseline);
        reference = run_kernels(rows, C, 11);
      }
      for (size_t i = 1; i < copies.size(); ++i) {
        INFO("copy " << nostrum::isa_name(copies[i]) << " against baseline");
        nostrum::ScopedElementwiseIsa copy(copies[i]);
        const Outputs got = run_kernels(rows, C, 11);
        REQUIRE(got.bytes.size() == reference.bytes.size());
        for (size_t k = 0; k < got.bytes.size(); ++k) {
          INFO(got.names[k]);
          const auto& a = got.bytes[k];
          const auto& b = reference.bytes[k];
          REQUIRE(a.size() == b.size());
          size_t differing = 0;
          for (size_t j = 0; j < a.size(); ++j) differing += a[j] != b[j];
          CHECK(differing == 0);
        }
      }
    }
  omp_set_num_threads(threads_before);
  CHECK(nostrum::dispatch_variants_ran(nostrum::DispatchSite::kBatchNormRows) == copies);
  CHECK(nostrum::elementwise_isa() == top);  // the scopes restored the table's copy
  // A copy above the table's is refused (avx512_bf16 is above every table's elementwise level).
  CHECK_THROWS_AS(nostrum::ScopedElementwiseIsa(Isa::kAvx512Bf16), nostrum::OptionError);
}
