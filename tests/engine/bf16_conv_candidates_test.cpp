// Every bf16 conv candidate of the registry (kernels/conv_candidate.hpp) against a float64
// reference on every resnet8 and ResNet-50 conv geometry (ResNet-50 at a 64x64 input) and odd
// ones, all three passes, threads 1 and 2, within the bf16 bound of bf16_conv_test.cpp. Reported
// skipped (77) on a CPU without AVX512_BF16 (tests/kernels/bf16_main.cpp).
#include <catch2/catch.hpp>

#include "conv_candidate_check.hpp"

using nostrum::kernels::Precision;
namespace testing = nostrum::testing;

TEST_CASE("every bf16 conv candidate within the bf16 bound on resnet8's geometries",
          "[bf16][conv]") {
  double worst = 0;
  testing::check_all_candidates(testing::model_conv_geometries("resnet8", 10, 1, 2, 28),
                                Precision::kBf16, testing::bf16_bound, &worst);
  WARN("resnet8 bf16 candidates: worst error / bound " << worst);
  CHECK(worst > 0.01);  // bf16 rounding is visible: not an fp32 path in disguise
}

TEST_CASE("every bf16 conv candidate within the bf16 bound on ResNet-50's geometries",
          "[bf16][conv]") {
  double worst = 0;
  testing::check_all_candidates(testing::model_conv_geometries("resnet50", 11, 3, 1, 64),
                                Precision::kBf16, testing::bf16_bound, &worst);
  WARN("ResNet-50 bf16 candidates: worst error / bound " << worst);
  CHECK(worst > 0.01);
}

TEST_CASE("every bf16 conv candidate within the bf16 bound on odd geometries", "[bf16][conv]") {
  double worst = 0;
  testing::check_all_candidates(testing::odd_conv_geometries(), Precision::kBf16,
                                testing::bf16_bound, &worst);
  WARN("odd geometries, bf16 candidates: worst error / bound " << worst);
  CHECK(worst > 0.01);
}
