// oneDNN's bf16 convolution passes (bf16 operands, fp32 results) against the float64 reference
// within the bf16 bound on every ResNet-50 and resnet8 geometry and on odd shapes, 1 and 2 threads.
// In the bf16 binary: reported skipped (77) where the CPU lacks AVX512_BF16.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "model_convs.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
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

// values rounded to bf16 words (what the model hands a kernel that takes them in bf16).
std::vector<uint16_t> bf16_words(const std::vector<float>& values) {
  std::vector<uint16_t> words(values.size());
  nostrum::kernels::convert_to_bf16(words.data(), values.data(), int64_t(values.size()));
  return words;
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

TEST_CASE(
    "oneDNN bf16 candidate: a pass whose bf16 copies exceed the budget runs image chunk by "
    "chunk, at the batch and a partial one",
    "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using nostrum::kernels::ConvCall;
  std::mt19937 rng(21);
  for (const ConvGeometry& g :
       {geometry(7, 12, 11, 20, 24, 3, 3, 1, 1), geometry(5, 9, 9, 16, 8, 1, 1, 2, 0)}) {
    for (ConvPass pass :
         {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
      // The budget of two images' copies: 4 chunks of 7 images, 3 of 5.
      const size_t in = size_t(g.H) * g.W * g.C * 2, out = size_t(g.P()) * g.Q() * g.K * 2;
      const size_t per_image = pass == ConvPass::kForward        ? in
                               : pass == ConvPass::kBackwardData ? out
                                                                 : in + out;
      int chunks = 0, whole_chunks = 0;
      auto chunked =
          nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, 2 * per_image, &chunks);
      auto whole =
          nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, SIZE_MAX, &whole_chunks);
      CHECK(chunks == (g.N + 1) / 2);
      CHECK(whole_chunks == 1);
      CHECK(chunked->scratch_floats() < whole->scratch_floats());
      Workspace scratch(chunked->scratch_floats() * sizeof(float));
      for (int N : {g.N, 3, g.N}) {
        ConvGeometry gn = g;
        gn.N = N;
        const Tensors t = random_tensors(gn, rng);
        const Reference ref(gn, t);
        for (bool accumulate : {false, true}) {
          if (accumulate && pass != ConvPass::kBackwardData) continue;
          const std::string what =
              name(gn) + " " + nostrum::kernels::conv_pass_name(pass) + (accumulate ? " +=" : "");
          ConvCall call;
          call.N = N;
          call.scratch = static_cast<float*>(scratch.data());
          call.accumulate_d_in = accumulate;
          auto result = nan_filled(pass == ConvPass::kForward        ? t.d_out.size()
                                   : pass == ConvPass::kBackwardData ? t.in.size()
                                                                     : t.weight.size());
          if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), result.begin());
          call.in = t.in.data(), call.weight = t.weight.data(), call.d_out = t.d_out.data();
          if (pass == ConvPass::kForward) call.d_out = nullptr, call.out = result.data();
          if (pass == ConvPass::kBackwardData) call.in = nullptr, call.d_in = result.data();
          if (pass == ConvPass::kBackwardWeights)
            call.weight = nullptr, call.d_weight = result.data();
          chunked->run(call);
          scratch.require_guard(what);
          if (pass == ConvPass::kForward)
            require_close(result, ref.out, ref.out_abs, ref.out_terms, Precision::kBf16, nullptr,
                          what);
          else if (pass == ConvPass::kBackwardData)
            require_close(result, ref.d_in, ref.d_in_abs, ref.d_in_terms, Precision::kBf16,
                          accumulate ? &t.d_in_base : nullptr, what);
          else
            require_close(result, ref.d_weight, ref.d_weight_abs, ref.d_weight_terms,
                          Precision::kBf16, nullptr, what);
        }
      }
    }
  }
}

TEST_CASE(
    "oneDNN bf16 candidate: a bf16 output gradient gives the backward passes' results bit "
    "for bit",
    "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using nostrum::kernels::ConvCall;
  std::mt19937 rng(31);
  for (const ConvGeometry& g :
       {geometry(5, 12, 11, 20, 24, 3, 3, 1, 1), geometry(6, 9, 9, 16, 8, 1, 1, 2, 0)}) {
    CHECK_FALSE(nostrum::kernels::prepare_onednn(g, ConvPass::kForward, Precision::kBf16, SIZE_MAX)
                    ->takes_bf16_d_out());
    CHECK_FALSE(
        nostrum::kernels::prepare_onednn(g, ConvPass::kBackwardData, Precision::kFp32, SIZE_MAX)
            ->takes_bf16_d_out());
    const Tensors t = random_tensors(g, rng);
    const std::vector<uint16_t> d_out_bf16 = bf16_words(t.d_out);
    for (ConvPass pass : {ConvPass::kBackwardData, ConvPass::kBackwardWeights})
      for (size_t budget : {size_t(SIZE_MAX), size_t(1)}) {  // whole batch; one image a chunk
        auto prepared = nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, budget);
        REQUIRE(prepared->takes_bf16_d_out());
        Workspace scratch(prepared->scratch_floats() * sizeof(float));
        for (int N : {g.N, 2})
          for (bool accumulate : {false, true}) {
            if (accumulate && pass != ConvPass::kBackwardData) continue;
            const std::string what = name(g) + " " + nostrum::kernels::conv_pass_name(pass) +
                                     " N " + std::to_string(N) + (accumulate ? " +=" : "") +
                                     " budget " + std::to_string(budget);
            const size_t size =
                pass == ConvPass::kBackwardData ? size_t(N) * g.H * g.W * g.C : t.weight.size();
            std::vector<float> from_fp32(size, 0.5f), from_bf16(size, 0.5f);
            for (std::vector<float>* result : {&from_fp32, &from_bf16}) {
              ConvCall call;
              call.N = N;
              call.scratch = static_cast<float*>(scratch.data());
              call.accumulate_d_in = accumulate;
              if (result == &from_fp32)
                call.d_out = t.d_out.data();
              else
                call.d_out_bf16 = d_out_bf16.data();
              if (pass == ConvPass::kBackwardData)
                call.weight = t.weight.data(), call.d_in = result->data();
              else
                call.in = t.in.data(), call.d_weight = result->data();
              prepared->run(call);
              scratch.require_guard(what);
            }
            INFO(what);
            CHECK(from_fp32 == from_bf16);
          }
      }
  }
}

TEST_CASE("oneDNN bf16 candidate: a bf16 input gives forward and backward-weights bit for bit",
          "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using nostrum::kernels::ConvCall;
  std::mt19937 rng(37);
  for (const ConvGeometry& g :
       {geometry(5, 12, 11, 20, 24, 3, 3, 1, 1), geometry(6, 9, 9, 16, 8, 1, 1, 2, 0)}) {
    CHECK_FALSE(
        nostrum::kernels::prepare_onednn(g, ConvPass::kBackwardData, Precision::kBf16, SIZE_MAX)
            ->takes_bf16_in());
    CHECK_FALSE(nostrum::kernels::prepare_onednn(g, ConvPass::kForward, Precision::kFp32, SIZE_MAX)
                    ->takes_bf16_in());
    const Tensors t = random_tensors(g, rng);
    const std::vector<uint16_t> in_bf16 = bf16_words(t.in);
    for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardWeights})
      for (size_t budget : {size_t(SIZE_MAX), size_t(1)}) {  // whole batch; one image a chunk
        auto prepared = nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, budget);
        REQUIRE(prepared->takes_bf16_in());
        Workspace scratch(prepared->scratch_floats() * sizeof(float));
        for (int N : {g.N, 2}) {
          const std::string what = name(g) + " " + nostrum::kernels::conv_pass_name(pass) + " N " +
                                   std::to_string(N) + " budget " + std::to_string(budget);
          const size_t size =
              pass == ConvPass::kForward ? size_t(N) * g.P() * g.Q() * g.K : t.weight.size();
          std::vector<float> from_fp32(size, 0.5f), from_bf16(size, 0.5f);
          for (std::vector<float>* result : {&from_fp32, &from_bf16}) {
            ConvCall call;
            call.N = N;
            call.scratch = static_cast<float*>(scratch.data());
            if (result == &from_fp32)
              call.in = t.in.data();
            else
              call.in_bf16 = in_bf16.data();
            if (pass == ConvPass::kForward)
              call.weight = t.weight.data(), call.out = result->data();
            else
              call.d_out = t.d_out.data(), call.d_weight = result->data();
            prepared->run(call);
            scratch.require_guard(what);
          }
          INFO(what);
          CHECK(from_fp32 == from_bf16);
        }
      }
  }
}

TEST_CASE("oneDNN bf16 candidate: a bf16 output is the fp32 one rounded, whole and chunked",
          "[bf16][onednn]") {
  // The forward keeping its output in bf16 (a conv before a batch norm): every word the fp32
  // output rounded to nearest even, at the batch and a partial one, whole and one image a chunk
  // (each chunk's words at its own images), with an fp32 or a bf16 input; ResNet-50 224's 1x1
  // 1024->512 at 14x14 (scaled to 2 images), where oneDNN 2.6 needs its own weight layout for it.
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using nostrum::kernels::ConvCall;
  std::mt19937 rng(41);
  for (const ConvGeometry& g :
       {geometry(5, 12, 11, 20, 24, 3, 3, 1, 1), geometry(6, 9, 9, 16, 8, 1, 1, 2, 0),
        geometry(2, 14, 14, 1024, 512, 1, 1, 1, 0)}) {
    CHECK_FALSE(nostrum::kernels::prepare_onednn(g, ConvPass::kForward, Precision::kFp32, SIZE_MAX)
                    ->writes_bf16_out());
    CHECK_FALSE(
        nostrum::kernels::prepare_onednn(g, ConvPass::kBackwardData, Precision::kBf16, SIZE_MAX)
            ->writes_bf16_out());
    const Tensors t = random_tensors(g, rng);
    const std::vector<uint16_t> in_bf16 = bf16_words(t.in);
    for (size_t budget : {size_t(SIZE_MAX), size_t(1)}) {
      auto prepared =
          nostrum::kernels::prepare_onednn(g, ConvPass::kForward, Precision::kBf16, budget);
      REQUIRE(prepared->writes_bf16_out());
      Workspace scratch(prepared->scratch_floats() * sizeof(float));
      for (int N : {g.N, 1})
        for (bool bf16_input : {false, true}) {
          const std::string what = name(g) + " N " + std::to_string(N) + " budget " +
                                   std::to_string(budget) + (bf16_input ? " bf16 input" : "");
          const size_t size = size_t(N) * g.P() * g.Q() * g.K;
          std::vector<float> out(size, 0.5f);
          std::vector<uint16_t> words(size, 0xFFFF);
          ConvCall call;
          call.N = N;
          call.scratch = static_cast<float*>(scratch.data());
          call.weight = t.weight.data();
          if (bf16_input)
            call.in_bf16 = in_bf16.data();
          else
            call.in = t.in.data();
          call.out = out.data();
          prepared->run(call);
          ConvCall bf16_call = call;
          bf16_call.out = nullptr;
          bf16_call.out_bf16 = words.data();
          prepared->run(bf16_call);
          scratch.require_guard(what);
          size_t differ = 0;
          for (size_t i = 0; i < size; ++i)
            differ += words[i] != nostrum::kernels::fp32_to_bf16(out[i]);
          INFO(what);
          CHECK(differ == 0);
        }
    }
  }
}
