// Every bf16 conv candidate of the registry (kernels/conv_candidate.hpp) against a float64
// reference on every resnet8 and ResNet-50 conv geometry (ResNet-50 at a 64x64 input) and odd
// ones, all three passes, threads 1 and 2, within the bf16 bound of bf16_conv_test.cpp; and a bf16
// model whose convs take their output gradients in bf16 against the same model rounding them per
// pass. Reported skipped (77) on a CPU without AVX512_BF16 (tests/kernels/bf16_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "conv_candidate_check.hpp"
#include "grad_check.hpp"
#include "model_compare.hpp"
#include "nostrum/model/model.hpp"

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

TEST_CASE("bf16 model: output gradients handed over in bf16 give the same step bit for bit",
          "[bf16][model]") {
  // resnet8 (stem, basic blocks, downsample shortcuts) and ResNet-50 (max-pool stem, bottlenecks).
  struct Shape {
    const char* name;
    int channels, batch, size;
  };
  for (const Shape& c : {Shape{"resnet8", 1, 4, 28}, Shape{"resnet50", 3, 2, 32}}) {
    INFO(c.name);
    nostrum::model::ModelConfig config;
    config.name = c.name;
    config.num_classes = 10;
    config.in_channels = c.channels;
    config.precision = Precision::kBf16;
    auto m = nostrum::model::Model::create(config);
    m->build(c.batch, c.size, c.size);
    m->init(3);
    const auto images = testing::random_vector(size_t(c.batch) * c.size * c.size * c.channels, 4);
    const std::vector<int32_t> labels = {1, 7, 3, 9};
    const auto step = [&] {
      m->forward(images.data(), c.batch, true);
      m->loss(labels.data(), 0.1f, 1.0f / c.batch);
      m->backward();
      return std::vector<float>(m->gradient_data(), m->gradient_data() + m->parameter_count());
    };
    // oneDNN's bf16 primitives, nostrum's bf16 GEMM: every conv takes its gradient in bf16.
    for (const char* kernel : {"onednn_bf16", "gemm_bf16"}) {
      INFO(kernel);
      testing::use_conv_kernels(*m, kernel);
      const int convs = m->bf16_gradient_convs();
      CHECK(convs > 0);
      const std::vector<float> handed_over = step();
      m->set_bf16_gradients(false);
      CHECK(m->bf16_gradient_convs() == 0);
      const std::vector<float> rounded_per_pass = step();
      CHECK(handed_over == rounded_per_pass);
      CHECK(std::any_of(handed_over.begin(), handed_over.end(), [](float v) { return v != 0.0f; }));
      m->set_bf16_gradients(true);
      CHECK(m->bf16_gradient_convs() == convs);
    }
    // An fp32 kernel in a bf16 run reads an fp32 gradient: no conv takes a bf16 one.
    testing::use_conv_kernels(*m, "gemm_openblas");
    CHECK(m->bf16_gradient_convs() == 0);
  }
}
