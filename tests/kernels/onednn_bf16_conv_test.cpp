// oneDNN's bf16 convolution passes (bf16 operands, fp32 results) against the float64 reference
// within the bf16 bound on every ResNet-50 and resnet8 geometry and on odd shapes, 1 and 2 threads.
// In the bf16 binary: reported skipped (77) where the CPU lacks AVX512_BF16.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
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

// Bytes of one image's bf16 copies in a pass (what the candidate's copy budget counts): the
// input, the output gradient or both.
size_t copy_bytes_per_image(const ConvGeometry& g, ConvPass pass) {
  const size_t in = size_t(g.H) * g.W * g.C * 2, out = size_t(g.P()) * g.Q() * g.K * 2;
  return pass == ConvPass::kForward ? in : pass == ConvPass::kBackwardData ? out : in + out;
}

// Floats of a pass's result (out, d_in or d_weight) for the tensors t.
size_t result_floats(const Tensors& t, ConvPass pass) {
  return pass == ConvPass::kForward        ? t.d_out.size()
         : pass == ConvPass::kBackwardData ? t.in.size()
                                           : t.weight.size();
}

// The pass's result against the float64 reference within the bf16 bound (d_in onto d_in_base
// where accumulating).
void require_pass_close(const std::vector<float>& result, const Tensors& t, const Reference& ref,
                        ConvPass pass, bool accumulate, const std::string& what) {
  if (pass == ConvPass::kForward)
    require_close(result, ref.out, ref.out_abs, ref.out_terms, Precision::kBf16, nullptr, what);
  else if (pass == ConvPass::kBackwardData)
    require_close(result, ref.d_in, ref.d_in_abs, ref.d_in_terms, Precision::kBf16,
                  accumulate ? &t.d_in_base : nullptr, what);
  else
    require_close(result, ref.d_weight, ref.d_weight_abs, ref.d_weight_terms, Precision::kBf16,
                  nullptr, what);
}

// Each of two shapes and three passes, prepared with a copy budget of two images (4 chunks of 7
// images, 3 of 5): f(g, pass, the chunked kernel, its chunks).
void for_each_chunked_pass(const std::function<void(const ConvGeometry&, ConvPass,
                                                    nostrum::kernels::PreparedConv&, int)>& f) {
  for (const ConvGeometry& g :
       {geometry(7, 12, 11, 20, 24, 3, 3, 1, 1), geometry(5, 9, 9, 16, 8, 1, 1, 2, 0)})
    for (ConvPass pass :
         {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
      int chunks = 0;
      auto chunked = nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16,
                                                      2 * copy_bytes_per_image(g, pass), &chunks);
      REQUIRE(chunks == (g.N + 1) / 2);
      f(g, pass, *chunked, chunks);
    }
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

TEST_CASE(
    "oneDNN bf16 conv: backward-data hands each chunk's partial to a finisher, bit for bit the "
    "pass then the finisher",
    "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  check_finisher_in_chunks(Precision::kBf16);
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
  for_each_chunked_pass(
      [&](const ConvGeometry& g, ConvPass pass, nostrum::kernels::PreparedConv& chunked, int) {
        int whole_chunks = 0;
        auto whole =
            nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, SIZE_MAX, &whole_chunks);
        CHECK(whole_chunks == 1);
        CHECK(chunked.scratch_floats() < whole->scratch_floats());
        Workspace scratch(chunked.scratch_floats() * sizeof(float));
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
            auto result = nan_filled(result_floats(t, pass));
            if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), result.begin());
            call.in = t.in.data(), call.weight = t.weight.data(), call.d_out = t.d_out.data();
            if (pass == ConvPass::kForward) call.d_out = nullptr, call.out = result.data();
            if (pass == ConvPass::kBackwardData) call.in = nullptr, call.d_in = result.data();
            if (pass == ConvPass::kBackwardWeights)
              call.weight = nullptr, call.d_weight = result.data();
            chunked.run(call);
            scratch.require_guard(what);
            require_pass_close(result, t, ref, pass, accumulate, what);
          }
        }
      });
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

TEST_CASE(
    "oneDNN bf16 candidate: a chunked pass given its bf16 operands runs the whole batch on one "
    "primitive, bit for bit the unchunked candidate's",
    "[bf16][onednn]") {
  // The chunks exist to bound the copies rounded from fp32; a call that gives every operand the
  // pass reads in bf16 makes no copies, and one primitive on the whole batch is faster (oneDNN's
  // AMX 1x1 forward of ResNet-50's layer2.0.conv1: 3.1-3.7 ms for 32 images, 4 x 1.2-1.5 in
  // chunks of 8). One operand of the weight gradient given and the other fp32: still chunked.
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using nostrum::kernels::ConvCall;
  using nostrum::kernels::onednn_last_run_primitives;
  std::mt19937 rng(43);
  for_each_chunked_pass([&](const ConvGeometry& g, ConvPass pass,
                            nostrum::kernels::PreparedConv& chunked, int chunks) {
    auto whole = nostrum::kernels::prepare_onednn(g, pass, Precision::kBf16, SIZE_MAX);
    Workspace chunked_scratch(chunked.scratch_floats() * sizeof(float));
    Workspace whole_scratch(whole->scratch_floats() * sizeof(float));
    for (int N : {g.N, 3, g.N}) {
      ConvGeometry gn = g;
      gn.N = N;
      const Tensors t = random_tensors(gn, rng);
      const Reference ref(gn, t);
      const std::vector<uint16_t> in_bf16 = bf16_words(t.in), d_out_bf16 = bf16_words(t.d_out);
      // Which operands come in bf16: all the pass reads; for the weight gradient also the input
      // alone (the output gradient then rounded in chunks).
      std::vector<std::pair<bool, bool>> given = {{true, true}};
      if (pass == ConvPass::kBackwardWeights) given.push_back({true, false});
      for (auto [give_in, give_d_out] : given)
        for (bool accumulate : {false, true}) {
          if (accumulate && pass != ConvPass::kBackwardData) continue;
          const bool all_given = give_in && give_d_out;
          const std::string what = name(gn) + " " + nostrum::kernels::conv_pass_name(pass) +
                                   (accumulate ? " +=" : "") +
                                   (all_given ? "" : " output gradient in fp32");
          std::vector<float> from_chunked = nan_filled(result_floats(t, pass)),
                             from_whole = nan_filled(result_floats(t, pass));
          for (std::vector<float>* result : {&from_chunked, &from_whole}) {
            const bool is_chunked = result == &from_chunked;
            Workspace& scratch = is_chunked ? chunked_scratch : whole_scratch;
            ConvCall call;
            call.N = N;
            call.scratch = static_cast<float*>(scratch.data());
            call.accumulate_d_in = accumulate;
            if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), result->begin());
            if (pass == ConvPass::kForward)
              call.in_bf16 = in_bf16.data(), call.weight = t.weight.data(),
              call.out = result->data();
            if (pass == ConvPass::kBackwardData)
              call.d_out_bf16 = d_out_bf16.data(), call.weight = t.weight.data(),
              call.d_in = result->data();
            if (pass == ConvPass::kBackwardWeights) {
              call.in_bf16 = in_bf16.data(), call.d_weight = result->data();
              if (give_d_out)
                call.d_out_bf16 = d_out_bf16.data();
              else
                call.d_out = t.d_out.data();
            }
            (is_chunked ? chunked : *whole).run(call);
            scratch.require_guard(what);
          }
          INFO(what);
          CHECK(onednn_last_run_primitives(chunked) == (all_given ? 1 : std::min(chunks, N)));
          CHECK(onednn_last_run_primitives(*whole) == 1);
          if (all_given) CHECK(from_chunked == from_whole);
          require_pass_close(from_chunked, t, ref, pass, accumulate, what);
        }
    }
    // An fp32 call of the chunked kernel still runs in chunks.
    const Tensors t = random_tensors(g, rng);
    std::vector<float> result(result_floats(t, pass));
    ConvCall call;
    call.N = g.N;
    call.scratch = static_cast<float*>(chunked_scratch.data());
    call.in = t.in.data(), call.weight = t.weight.data(), call.d_out = t.d_out.data();
    if (pass == ConvPass::kForward) call.d_out = nullptr, call.out = result.data();
    if (pass == ConvPass::kBackwardData) call.in = nullptr, call.d_in = result.data();
    if (pass == ConvPass::kBackwardWeights) call.weight = nullptr, call.d_weight = result.data();
    chunked.run(call);
    CHECK(onednn_last_run_primitives(chunked) == chunks);
  });
}

TEST_CASE(
    "oneDNN bf16 candidate: a chunked backward-data pass hands a finisher each chunk's rows in "
    "order, bit for bit the pass then the finisher",
    "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  std::mt19937 rng(53);
  for_each_chunked_pass([&](const ConvGeometry& g, ConvPass pass,
                            nostrum::kernels::PreparedConv& chunked, int chunks) {
    if (pass != ConvPass::kBackwardData) return;
    CHECK(chunked.finishes_d_in());
    Workspace scratch(chunked.scratch_floats() * sizeof(float));
    const Tensors t = random_tensors(g, rng);
    for (bool accumulate : {false, true}) {
      const std::string what = name(g) + (accumulate ? " +=" : "");
      RecordedAddBackward add_backward(int64_t(g.N) * g.H * g.W, g.C, rng);
      auto fused = nan_filled(t.in.size()), after = nan_filled(t.in.size());
      for (auto* d_in : {&fused, &after}) {
        if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), d_in->begin());
        nostrum::kernels::ConvCall call;
        call.N = g.N;
        call.scratch = static_cast<float*>(scratch.data());
        call.accumulate_d_in = accumulate;
        call.d_out = t.d_out.data(), call.weight = t.weight.data(), call.d_in = d_in->data();
        if (d_in == &fused) add_backward.start(d_in->data()), call.finish_d_in = &add_backward;
        nostrum::kernels::run_and_finish_d_in(chunked, call);
        scratch.require_guard(what);
      }
      const auto after_sums = add_backward.after(after.data());
      add_backward.require_calls(size_t(chunks), accumulate, what);
      INFO(what);
      CHECK(differing_elements(fused, after) == 0);
      CHECK(differing_elements(add_backward.sums[0], after_sums[0]) == 0);
      CHECK(differing_elements(add_backward.sums[1], after_sums[1]) == 0);
    }
  });
}

TEST_CASE(
    "oneDNN bf16 conv: a primitive for given bf16 operands lays out no copies and refuses fp32 "
    "ones by name",
    "[bf16][onednn]") {
  REQUIRE(nostrum::kernels::onednn_bf16_native());
  using Operands = OnednnConv::Bf16Operands;
  const ConvGeometry g = geometry(4, 12, 11, 20, 24, 3, 3, 1, 1);
  const Tensors t = [&] {
    std::mt19937 rng(47);
    return random_tensors(g, rng);
  }();
  const std::vector<uint16_t> in_bf16 = bf16_words(t.in), d_out_bf16 = bf16_words(t.d_out);
  for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
    OnednnConv rounded(g, pass, Precision::kBf16, SIZE_MAX, Operands::kRounded);
    OnednnConv given(g, pass, Precision::kBf16, SIZE_MAX, Operands::kGiven);
    INFO(nostrum::kernels::conv_pass_name(pass));
    // The copies: the input (N*H*W*C words) or the output gradient (N*P*Q*K), or both.
    const size_t in = size_t(g.N) * g.H * g.W * g.C * 2,
                 out = size_t(g.N) * g.P() * g.Q() * g.K * 2;
    const size_t copies = pass == ConvPass::kForward        ? in
                          : pass == ConvPass::kBackwardData ? out
                                                            : in + out;
    CHECK(given.workspace_bytes() + copies <= rounded.workspace_bytes());
    Workspace scratch(given.workspace_bytes());
    std::vector<float> result(std::max({t.in.size(), t.d_out.size(), t.weight.size()}));
    switch (pass) {
      case ConvPass::kForward:
        CHECK_THROWS_WITH(
            given.forward(result.data(), t.in.data(), t.weight.data(), scratch.data()),
            Catch::Contains("an fp32 input for a primitive built for bf16 operands") &&
                Catch::Contains("N=4 H=12 W=11 C=20 K=24"));
        given.forward(result.data(), nullptr, t.weight.data(), scratch.data(), in_bf16.data());
        break;
      case ConvPass::kBackwardData:
        CHECK_THROWS_WITH(given.backward_data(result.data(), t.d_out.data(), t.weight.data(), false,
                                              scratch.data()),
                          Catch::Contains("an fp32 output gradient for a primitive built for "
                                          "bf16 operands"));
        given.backward_data(result.data(), nullptr, t.weight.data(), false, scratch.data(),
                            d_out_bf16.data());
        break;
      case ConvPass::kBackwardWeights:
        CHECK_THROWS_WITH(given.backward_weights(result.data(), nullptr, t.in.data(),
                                                 scratch.data(), d_out_bf16.data()),
                          Catch::Contains("an fp32 input for a primitive built for bf16 operands"));
        given.backward_weights(result.data(), nullptr, nullptr, scratch.data(), d_out_bf16.data(),
                               in_bf16.data());
        break;
    }
    scratch.require_guard(nostrum::kernels::conv_pass_name(pass));
  }
}
