// Every bf16 conv candidate of the registry (kernels/conv_candidate.hpp) against a float64
// reference on every resnet8 and ResNet-50 conv geometry (ResNet-50 at a 64x64 input) and odd
// ones, all three passes, threads 1 and 2, within the bf16 bound of bf16_conv_test.cpp; and a bf16
// model whose convs take their output gradients and inputs in bf16 against the same model rounding
// them per pass. Reported skipped (77) on a CPU without AVX512_BF16 (tests/kernels/bf16_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
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

TEST_CASE(
    "bf16 model: gradients and activations handed over in bf16 give the same step bit for bit",
    "[bf16][model]") {
  // resnet8 (stem, basic blocks, downsample shortcuts) and ResNet-50 (max-pool stem, bottlenecks),
  // with the residual stream in fp32 and in bf16 (set_bf16_block_outputs: the hand-over is
  // bit-identical either way).
  struct Shape {
    const char* name;
    int channels, batch, size, inner_norms;  // inner_norms: batch norms inside residual paths
    int block_outputs, front_convs;  // residual blocks but the last; the convs that read them
  };
  for (const Shape& c :
       {Shape{"resnet8", 1, 4, 28, 3, 2, 4}, Shape{"resnet50", 3, 2, 32, 32, 15, 18}})
    for (bool block_outputs : {false, true}) {
      INFO(c.name << " bf16 block outputs " << block_outputs);
      nostrum::model::ModelConfig config;
      config.name = c.name;
      config.num_classes = 10;
      config.in_channels = c.channels;
      config.precision = Precision::kBf16;
      auto m = nostrum::model::Model::create(config);
      m->build(c.batch, c.size, c.size);
      m->init(3);
      m->set_bf16_block_outputs(block_outputs);
      const int stream_convs = block_outputs ? c.front_convs : 0;  // read a bf16 block output
      const auto images = testing::random_vector(size_t(c.batch) * c.size * c.size * c.channels, 4);
      const std::vector<int32_t> labels = {1, 7, 3, 9};
      // A training step's gradients, then an eval forward's logits (the running statistics moved),
      // each time from the same running statistics.
      const std::vector<float> buffers(m->buffer_data(), m->buffer_data() + m->buffer_count());
      const auto step = [&] {
        std::copy(buffers.begin(), buffers.end(), m->buffer_data());
        m->forward(images.data(), c.batch, true);
        m->loss(labels.data(), 0.1f, 1.0f / c.batch);
        m->backward();
        std::vector<float> out(m->gradient_data(), m->gradient_data() + m->parameter_count());
        const float* logits = m->forward(images.data(), c.batch, false);
        out.insert(out.end(), logits, logits + c.batch * 10);
        return out;
      };
      // oneDNN's bf16 primitives, nostrum's bf16 GEMM: every conv takes its gradient in bf16, and
      // every conv after an inner batch norm its input.
      for (const char* kernel : {"onednn_bf16", "gemm_bf16"}) {
        INFO(kernel);
        testing::use_conv_kernels(*m, kernel);
        const int convs = m->bf16_gradient_convs();
        CHECK(convs > 0);
        CHECK(m->bf16_input_convs() == c.inner_norms + stream_convs);
        CHECK(m->bf16_block_outputs() == (block_outputs ? c.block_outputs : 0));
        const std::vector<float> handed_over = step();
        m->set_bf16_handover(false);
        CHECK(m->bf16_gradient_convs() == 0);
        CHECK(m->bf16_input_convs() == stream_convs);
        const std::vector<float> rounded_per_pass = step();
        size_t differ = handed_over.size() == rounded_per_pass.size() ? 0 : 1;
        for (size_t i = 0; i < std::min(handed_over.size(), rounded_per_pass.size()); ++i)
          differ += handed_over[i] != rounded_per_pass[i];
        CHECK(differ == 0);
        CHECK(
            std::any_of(handed_over.begin(), handed_over.end(), [](float v) { return v != 0.0f; }));
        m->set_bf16_handover(true);
        CHECK(m->bf16_gradient_convs() == convs);
        CHECK(m->bf16_input_convs() == c.inner_norms + stream_convs);
      }
      // An fp32 kernel in a bf16 run reads fp32 tensors: nothing is handed over, and the residual
      // stream stays fp32 (no conv could read a bf16 block output).
      testing::use_conv_kernels(*m, "gemm_openblas");
      CHECK(m->bf16_gradient_convs() == 0);
      CHECK(m->bf16_input_convs() == 0);
      CHECK(m->bf16_block_outputs() == 0);
    }
}

TEST_CASE("bf16 model: the residual stream in bf16 changes the step and is switched off by name",
          "[bf16][model]") {
  // Block outputs kept in bf16 are a numerics change (the adds read rounded shortcuts): the step
  // differs from the fp32 stream's, by about bf16's rounding (the PyTorch comparison bounds the
  // whole model: bf16_torch_compare_test.cpp); off gives back the fp32 stream's bits.
  nostrum::model::ModelConfig config;
  config.name = "resnet8";
  config.num_classes = 10;
  config.in_channels = 1;
  config.precision = Precision::kBf16;
  auto m = nostrum::model::Model::create(config);
  m->build(4, 28, 28);
  m->init(3);
  testing::use_conv_kernels(*m, "onednn_bf16");
  const auto images = testing::random_vector(size_t(4) * 28 * 28, 4);
  const std::vector<int32_t> labels = {1, 7, 3, 9};
  const std::vector<float> buffers(m->buffer_data(), m->buffer_data() + m->buffer_count());
  const auto step = [&] {
    std::copy(buffers.begin(), buffers.end(), m->buffer_data());
    const float* logits = m->forward(images.data(), 4, true);
    std::vector<float> out(logits, logits + 40);
    m->loss(labels.data(), 0.1f, 0.25f);
    m->backward();
    out.insert(out.end(), m->gradient_data(), m->gradient_data() + m->parameter_count());
    return out;
  };
  m->set_bf16_block_outputs(false);
  const std::vector<float> fp32_stream = step();
  m->set_bf16_block_outputs(true);
  REQUIRE(m->bf16_block_outputs() == 2);
  const std::vector<float> bf16_stream = step();
  m->set_bf16_block_outputs(false);
  const std::vector<float> fp32_again = step();
  REQUIRE(bf16_stream.size() == fp32_stream.size());
  size_t differ = 0, again = 0;
  double diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < fp32_stream.size(); ++i) {
    differ += bf16_stream[i] != fp32_stream[i];
    again += fp32_again[i] != fp32_stream[i];
    diff2 += double(bf16_stream[i] - fp32_stream[i]) * (bf16_stream[i] - fp32_stream[i]);
    ref2 += double(fp32_stream[i]) * fp32_stream[i];
  }
  CHECK(differ > fp32_stream.size() / 2);
  CHECK(again == 0);
  // The logits and gradients together move by a bf16-sized amount (0.036 on the Zen 4), not O(1).
  WARN("relative change of logits and gradients " << std::sqrt(diff2 / ref2));
  CHECK(std::sqrt(diff2 / ref2) < 0.125);  // 2^-3, as bf16_torch_compare_test.cpp bounds logits
}
