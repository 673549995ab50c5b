// oneDNN's bf16 convolution passes (bf16 operands, fp32 results) against the float64 reference
// within the bf16 bound on every ResNet-50 and resnet8 geometry and on odd shapes, 1 and 2 threads.
// In the bf16 binary: reported skipped (77) where the CPU lacks AVX512_BF16.
#include <omp.h>
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <tuple>

#include "model_convs.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/onednn_candidates.hpp"
#include "onednn_conv_check.hpp"

using namespace onednn_check;

namespace {

void check_all(const std::vector<ConvGeometry>& shapes, uint32_t seed) {
  REQUIRE(nostrum::kernels::onednn_bf16_native());  // the binary's main skips CPUs without bf16
  const int saved = omp_get_max_threads();
  std::mt19937 rng(seed);
  double worst = 0.0;
  for (const ConvGeometry& g : shapes) {
    const Tensors t = random_tensors(g, rng);
    const Reference ref(g, t);
    for (int threads : {1, 2})
      worst = std::max(worst, check_passes(g, t, ref, Precision::kBf16, threads));
  }
  omp_set_num_threads(saved);
  INFO("worst error / bound " << worst);
  CHECK(worst > 0.01);  // bf16 rounding is visible: not an fp32 path in disguise
}

}  // namespace

TEST_CASE("oneDNN bf16 conv: every ResNet-50 and resnet8 geometry, three passes, 1 and 2 threads",
          "[bf16][onednn]") {
  check_all(model_shapes(), 11);
}

TEST_CASE("oneDNN bf16 conv: odd shapes, three passes, 1 and 2 threads", "[bf16][onednn]") {
  check_all(odd_shapes(), 12);
}

TEST_CASE("oneDNN bf16 candidate: every pass prepared once, run at the batch and a partial one",
          "[bf16][onednn]") {
  const auto& candidate = nostrum::kernels::onednn_bf16_candidate();
  CHECK(std::string(candidate.name()) == "onednn_bf16");
  REQUIRE(candidate.available(nostrum::cpu_features()));
  CHECK_FALSE(candidate.supports(Precision::kFp32));
  check_candidate(candidate, Precision::kBf16);
}

TEST_CASE("oneDNN bf16 conv: backward-data accumulates a large batch chunk by chunk",
          "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  check_accumulate_in_chunks(Precision::kBf16);
}

TEST_CASE("oneDNN bf16 conv: refused naming the feature where bf16 is not native",
          "[any-cpu][onednn]") {
  if (nostrum::kernels::onednn_bf16_native()) return;  // nothing to refuse here
  CHECK_FALSE(nostrum::kernels::onednn_bf16_candidate().available(nostrum::cpu_features()));
  CHECK_THROWS_WITH(
      OnednnConv(geometry(1, 5, 5, 4, 4, 3, 3, 1, 1), ConvPass::kForward, Precision::kBf16),
      Catch::Contains("need AVX512_BF16 or AMX"));
}
