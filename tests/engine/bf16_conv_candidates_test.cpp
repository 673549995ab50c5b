// Every bf16 conv candidate of the registry (kernels/conv_candidate.hpp) against a float64
// reference on every resnet8 and ResNet-50 conv geometry (ResNet-50 at a 64x64 input) and odd
// ones, all three passes, threads 1 and 2, within the bf16 bound of bf16_conv_test.cpp; and a bf16
// model whose convs take their output gradients and inputs in bf16 against the same model rounding
// them per pass. Reported skipped (77) on a CPU without AVX512_BF16 (tests/kernels/bf16_main.cpp).
#include <omp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "conv_candidate_check.hpp"
#include "grad_check.hpp"
#include "model_compare.hpp"
#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "nostrum/kernels/winograd_conv.hpp"
#include "nostrum/model/model.hpp"

using nostrum::kernels::ConvPass;
using nostrum::kernels::Precision;
namespace kernels = nostrum::kernels;
namespace testing = nostrum::testing;

namespace {

// The first n values of x rounded to bf16 words (the scalar reference rounding).
std::vector<uint16_t> bf16_words(const float* x, size_t n) {
  std::vector<uint16_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = kernels::fp32_to_bf16(x[i]);
  return w;
}

}  // namespace

namespace {

// winograd_bf16 with its weight gradient's chunks of transformed tiles cut to a few tiles each, so
// that a small shape runs many chunks (kernels/winograd_conv.hpp's prepare_winograd).
class SmallChunkWinograd final : public kernels::ConvCandidate {
 public:
  explicit SmallChunkWinograd(int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  const char* name() const override { return "winograd_bf16 (small chunks)"; }
  const char* description() const override { return base().description(); }
  bool available(const nostrum::CpuFeatures& cpu) const override { return base().available(cpu); }
  kernels::ConvRounding rounding() const override { return base().rounding(); }
  bool supports(Precision p) const override { return base().supports(p); }
  bool fits(const kernels::ConvGeometry& g, ConvPass pass) const override {
    return pass == ConvPass::kBackwardWeights && base().fits(g, pass);
  }
  std::unique_ptr<kernels::PreparedConv> prepare(const kernels::ConvGeometry& g, ConvPass pass,
                                                 Precision) const override {
    return kernels::prepare_winograd(g, pass, chunk_bytes_);
  }

 private:
  static const kernels::ConvCandidate& base() { return kernels::winograd_bf16_candidate(); }
  int64_t chunk_bytes_;
};

}  // namespace

TEST_CASE(
    "winograd_bf16's weight gradient over many chunks of tiles: within its bound, the same "
    "bits on 1 and 2 threads",
    "[bf16][conv]") {
  if (!kernels::winograd_bf16_candidate().available(nostrum::cpu_features())) return;
  // 3 images of 9x7: 5 x 4 tiles each, 60 tiles (the last row and column part outside), 32 -> 64
  // channels: 16 x 2 x 96 = 3,072 bytes of transforms a tile. A budget of 7 tiles: 9 chunks of 8
  // tiles (even), the last of 4.
  const kernels::ConvGeometry g = testing::conv_geometry(3, 9, 7, 32, 64, 3, 3, 1, 1);
  const SmallChunkWinograd chunked(7 * 3072);
  const testing::ConvCase cc(g);
  double worst = 0;
  for (int threads : {1, 2})
    REQUIRE(testing::check_candidate(chunked, cc, Precision::kBf16, threads, testing::bf16_bound,
                                     &worst) == 1);
  CHECK(worst > 0.01);
  // The chunks in order on any thread count: the same bits.
  std::vector<std::vector<float>> results;
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    auto kernel = chunked.prepare(g, ConvPass::kBackwardWeights, Precision::kBf16);
    nostrum::Arena scratch(kernel->scratch_floats() + 1, "test scratch");
    results.emplace_back(cc.weight.size(), 0.0f);
    kernels::ConvCall call;
    call.N = g.N, call.in = cc.in.data(), call.d_out = cc.d_out.data();
    call.d_weight = results.back().data(), call.scratch = scratch.data();
    kernel->run(call);
  }
  omp_set_num_threads(saved_threads);
  CHECK(results[0] == results[1]);
}

TEST_CASE(
    "gemm_bf16_per_thread_in_rows: the weight gradient of gemm_bf16_per_thread bit for bit, where "
    "it has fewer rows than columns only",
    "[bf16][conv]") {
  const kernels::ConvCandidate* in_rows =
      kernels::find_conv_candidate("gemm_bf16_per_thread_in_rows");
  REQUIRE(in_rows != nullptr);
  if (!in_rows->available(nostrum::cpu_features())) return;
  const int saved_threads = omp_get_max_threads();
  // Not where it would run as the plain one (K >= R*S*C), nor another pass.
  omp_set_num_threads(2);
  CHECK_FALSE(in_rows->fits(testing::conv_geometry(6, 5, 6, 24, 40, 1, 1, 1, 0),
                            ConvPass::kBackwardWeights));
  CHECK_FALSE(in_rows->fits(testing::conv_geometry(6, 5, 6, 4, 40, 3, 3, 1, 1),
                            ConvPass::kBackwardWeights));
  CHECK_FALSE(
      in_rows->fits(testing::conv_geometry(6, 5, 6, 40, 24, 1, 1, 1, 0), ConvPass::kForward));
  CHECK_FALSE(
      in_rows->fits(testing::conv_geometry(6, 5, 6, 40, 24, 1, 1, 1, 0), ConvPass::kBackwardData));
  omp_set_num_threads(saved_threads);
  // ResNet-50's 256 -> 64 1x1 at a small map (the input itself the columns), an odd 1x1, a 1x1 of
  // stride 2 and a 3x3 of stride 2 (im2col's tiles the columns), and the classifier's 2048 -> 10
  // (a 1x1 conv of a 1x1 image).
  testing::check_same_weight_gradients("gemm_bf16_per_thread_in_rows", "gemm_bf16_per_thread",
                                       Precision::kBf16,
                                       {testing::conv_geometry(4, 9, 7, 256, 64, 1, 1, 1, 0),
                                        testing::conv_geometry(5, 5, 7, 77, 35, 1, 1, 1, 0),
                                        testing::conv_geometry(6, 9, 8, 40, 24, 1, 1, 2, 0),
                                        testing::conv_geometry(6, 9, 7, 16, 24, 3, 3, 2, 1),
                                        testing::conv_geometry(33, 1, 1, 2048, 10, 1, 1, 1, 0)});
}

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
    // residual blocks but the last (and a max-pool stem); the convs that read their outputs
    int block_outputs, front_convs;
    int convs;  // every conv, downsample convs included: each has a batch norm after it
  };
  for (const Shape& c :
       {Shape{"resnet8", 1, 4, 28, 3, 3, 5, 9}, Shape{"resnet50", 3, 2, 32, 32, 16, 20, 53}})
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
        CHECK(m->bf16_gradient_convs() == c.convs);
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
        CHECK(m->bf16_gradient_convs() == c.convs);
        CHECK(m->bf16_input_convs() == c.inner_norms + stream_convs);
      }
      // An fp32 kernel in a bf16 run takes the bf16 operands widened (prepare_conv_candidate):
      // it keeps no tensor in fp32 that a bf16 kernel would take in bf16.
      testing::use_conv_kernels(*m, "gemm_openblas");
      CHECK(m->bf16_gradient_convs() == c.convs);
      CHECK(m->bf16_input_convs() == c.inner_norms + stream_convs);
      CHECK(m->bf16_block_outputs() == (block_outputs ? c.block_outputs : 0));
    }
}

TEST_CASE(
    "bf16 model: the residual stream and conv outputs in bf16 change the step, switched off "
    "by name",
    "[bf16][model]") {
  // Block outputs kept in bf16 are a numerics change (the adds read rounded shortcuts), and so
  // are conv outputs kept in bf16 (the batch norms read them rounded): each changes the step by
  // about bf16's rounding (the PyTorch comparison bounds the whole model:
  // bf16_torch_compare_test.cpp); off gives back the bits of the step without it.
  nostrum::model::ModelConfig config;
  config.name = "resnet8";
  config.num_classes = 10;
  config.in_channels = 1;
  config.precision = Precision::kBf16;
  auto m = nostrum::model::Model::create(config);
  m->build(4, 28, 28);
  m->init(3);
  testing::use_conv_kernels(*m, "onednn_bf16");
  CHECK(m->bf16_conv_outputs() == 9);  // every conv of resnet8 writes bf16 on oneDNN
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
  const auto compare = [&](const char* what, const auto& set, int expect_count, const auto& count) {
    INFO(what);
    set(false);
    CHECK(count() == 0);
    const std::vector<float> without = step();
    set(true);
    REQUIRE(count() == expect_count);
    const std::vector<float> with = step();
    set(false);
    const std::vector<float> again = step();
    REQUIRE(with.size() == without.size());
    size_t differ = 0, same_again = 0;
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < without.size(); ++i) {
      differ += with[i] != without[i];
      same_again += again[i] == without[i];
      diff2 += double(with[i] - without[i]) * (with[i] - without[i]);
      ref2 += double(without[i]) * without[i];
    }
    CHECK(differ > without.size() / 2);
    CHECK(same_again == without.size());
    // The logits and gradients together move by a bf16-sized amount (0.036 for the block
    // outputs on the Zen 4), not O(1).
    WARN(what << ": relative change of logits and gradients " << std::sqrt(diff2 / ref2));
    CHECK(std::sqrt(diff2 / ref2) < 0.125);  // 2^-3, as bf16_torch_compare_test.cpp bounds logits
    set(true);
  };
  compare(
      "block outputs", [&](bool on) { m->set_bf16_block_outputs(on); }, 3,
      [&] { return m->bf16_block_outputs(); });
  compare(
      "conv outputs", [&](bool on) { m->set_bf16_conv_outputs(on); }, 9,
      [&] { return m->bf16_conv_outputs(); });
  // nostrum's own bf16 GEMM writes fp32: its convs keep fp32 outputs.
  testing::use_conv_kernels(*m, "gemm_bf16");
  CHECK(m->bf16_conv_outputs() == 0);
  CHECK(m->bf16_block_outputs() == 3);  // the stem's and the first two blocks' (the last: fp32)
}

TEST_CASE("the measurement times a kernel on the bf16 operands the model hands it",
          "[bf16][conv]") {
  // A bf16 run hands most convs their output gradient, many their input, in bf16; a kernel that
  // takes them is timed so (the rounded operand, no fp32 one), an fp32 kernel too (it widens
  // them: prepare_conv_candidate); an operand the model does not hand over stays fp32.
  const kernels::ConvGeometry g{4, 8, 8, 16, 32, 3, 3, 1, 1};
  const size_t in_floats = g.input_floats(), out_floats = g.output_floats();
  kernels::ConvMeasureBuffers buffers;
  const kernels::ConvCandidate* onednn_bf16 = kernels::find_conv_candidate("onednn_bf16");
  const kernels::ConvCandidate* openblas = kernels::find_conv_candidate("gemm_openblas");
  REQUIRE(onednn_bf16);
  REQUIRE(openblas);
  for (ConvPass pass : kernels::kConvPasses)
    for (bool handed : {false, true}) {
      INFO(kernels::conv_pass_name(pass) << " handed over " << handed);
      kernels::ConvPassShape shape{g, pass, handed, handed, handed && pass == ConvPass::kForward};
      const auto bf16_kernel = onednn_bf16->prepare(g, pass, Precision::kBf16);
      const kernels::ConvCall c = kernels::measurement_call(shape, Precision::kBf16, *bf16_kernel,
                                                            buffers, bf16_kernel->scratch_floats());
      const bool in_read = pass != ConvPass::kBackwardData;
      const bool d_out_read = pass != ConvPass::kForward;
      CHECK((c.in_bf16 != nullptr) == (handed && in_read));
      CHECK((c.in != nullptr) == (!handed && in_read));
      CHECK((c.d_out_bf16 != nullptr) == (handed && d_out_read));
      CHECK((c.d_out != nullptr) == (!handed && d_out_read));
      const bool forward = pass == ConvPass::kForward;
      CHECK((c.out_bf16 != nullptr) == (handed && forward));  // kept in bf16 for the batch norm
      CHECK((c.out != nullptr) == (!handed && forward));
      // The bf16 operands are the fp32 ones rounded.
      const int first = 0, second = 1;
      if (c.in_bf16)
        CHECK(std::vector<uint16_t>(c.in_bf16, c.in_bf16 + in_floats) ==
              bf16_words(buffers.operand(first, in_floats), in_floats));
      if (c.d_out_bf16) {
        const int which = pass == ConvPass::kBackwardData ? first : second;
        CHECK(std::vector<uint16_t>(c.d_out_bf16, c.d_out_bf16 + out_floats) ==
              bf16_words(buffers.operand(which, out_floats), out_floats));
      }
      // An fp32 kernel in a bf16 run is timed on the same bf16 operands (it widens them), and
      // writes fp32; an fp32 run reads fp32 operands whatever the model hands over.
      const auto fp32_kernel =
          kernels::prepare_conv_candidate(*openblas, g, pass, Precision::kBf16);
      const kernels::ConvCall f = kernels::measurement_call(shape, Precision::kBf16, *fp32_kernel,
                                                            buffers, fp32_kernel->scratch_floats());
      CHECK((f.in_bf16 != nullptr) == (handed && in_read));
      CHECK((f.d_out_bf16 != nullptr) == (handed && d_out_read));
      CHECK(f.out_bf16 == nullptr);
      const auto fp32_run = onednn_bf16->prepare(g, pass, Precision::kFp32);
      CHECK(kernels::measurement_call(shape, Precision::kFp32, *fp32_run, buffers,
                                      fp32_run->scratch_floats())
                .in_bf16 == nullptr);
    }
}

TEST_CASE("an fp32 kernel in a bf16 run takes bf16 operands, widened: the fp32 kernel's bits",
          "[bf16][conv]") {
  // prepare_conv_candidate wraps every fp32 candidate serving a bf16 run: handed the input and the
  // output gradient in bf16, it runs the fp32 kernel on them widened, bit for bit the fp32 kernel
  // on fp32 tensors holding those values; handed fp32 tensors, the fp32 kernel's own bits. A bf16
  // candidate and an fp32 run are left as they are.
  const auto widened = [](const std::vector<uint16_t>& w) {
    std::vector<float> x(w.size());
    for (size_t i = 0; i < w.size(); ++i) x[i] = kernels::bf16_to_fp32(w[i]);
    return x;
  };
  int checked = 0;
  for (const kernels::ConvGeometry& g : {kernels::ConvGeometry{4, 9, 7, 16, 32, 3, 3, 1, 1},
                                         kernels::ConvGeometry{3, 10, 10, 32, 16, 1, 1, 2, 0},
                                         kernels::ConvGeometry{2, 12, 12, 3, 16, 7, 7, 2, 3}})
    for (const kernels::ConvCandidate* cand : kernels::conv_candidates())
      for (ConvPass pass : kernels::kConvPasses) {
        if (!kernels::conv_candidate_eligible(*cand, g, pass, Precision::kBf16)) continue;
        INFO(cand->name() << " " << kernels::conv_shape_name(g) << " "
                          << kernels::conv_pass_name(pass));
        auto plain = cand->prepare(g, pass, Precision::kBf16);
        auto kernel = kernels::prepare_conv_candidate(*cand, g, pass, Precision::kBf16);
        if (cand->supports(Precision::kBf16)) {  // left as it is
          CHECK(kernel->takes_bf16_in() == plain->takes_bf16_in());
          CHECK(kernel->takes_bf16_d_out() == plain->takes_bf16_d_out());
          continue;
        }
        CHECK(!kernels::prepare_conv_candidate(*cand, g, pass, Precision::kFp32)->takes_bf16_in());
        CHECK(kernel->takes_bf16_in() == (pass != ConvPass::kBackwardData));
        CHECK(kernel->takes_bf16_d_out() == (pass != ConvPass::kForward));
        CHECK(!kernel->writes_bf16_out());
        const size_t in_n = g.input_floats(), out_n = g.output_floats(), w_n = g.weight_floats();
        const std::vector<uint16_t> in_w =
            bf16_words(testing::random_vector(in_n, 11).data(), in_n);
        const std::vector<uint16_t> d_out_w =
            bf16_words(testing::random_vector(out_n, 12).data(), out_n);
        const std::vector<float> in = widened(in_w), d_out = widened(d_out_w);
        const std::vector<float> weight = testing::random_vector(w_n, 13);
        const size_t result_n = pass == ConvPass::kForward        ? out_n
                                : pass == ConvPass::kBackwardData ? in_n
                                                                  : w_n;
        // The adapter's scratch holds the fp32 kernel's after its widened operands.
        nostrum::Arena scratch(kernel->scratch_floats() + 1, "test conv scratch");
        const auto run = [&](kernels::PreparedConv& k, bool handed) {
          std::vector<float> result(result_n, 0.0f);
          kernels::ConvCall c;
          c.N = g.N;
          c.scratch = scratch.data();
          c.weight = weight.data();
          if (pass == ConvPass::kForward) c.out = result.data();
          if (pass == ConvPass::kBackwardData) c.d_in = result.data();
          if (pass == ConvPass::kBackwardWeights) c.d_weight = result.data();
          if (pass != ConvPass::kBackwardData) {
            if (handed)
              c.in_bf16 = in_w.data();
            else
              c.in = in.data();
          }
          if (pass != ConvPass::kForward) {
            if (handed)
              c.d_out_bf16 = d_out_w.data();
            else
              c.d_out = d_out.data();
          }
          k.run(c);
          return result;
        };
        const std::vector<float> reference = run(*plain, false);
        CHECK(std::any_of(reference.begin(), reference.end(), [](float v) { return v != 0.0f; }));
        CHECK(run(*kernel, true) == reference);
        CHECK(run(*kernel, false) == reference);
        ++checked;
      }
  CHECK(checked > 0);
}

TEST_CASE("a bf16 model's conv shapes name the operands it hands over", "[bf16][conv]") {
  // ResNet-50: every conv's output gradient comes from the batch norm after it; the input in bf16
  // from an inner batch norm, the previous block's output or the stem's max-pool (layer1.0's conv1
  // and downsample), except the stem conv (the images). The classifier's gradient and input stay
  // fp32. layer1.0's downsample shares its shape with layer1's conv3s, which read bf16 from an
  // inner batch norm: with the stem's output in fp32 (the block outputs off) the shape takes fp32,
  // as one of its layers does.
  nostrum::model::ModelConfig config;
  config.name = "resnet50";
  config.num_classes = 10;
  config.precision = Precision::kBf16;
  auto m = nostrum::model::Model::create(config);
  m->build(2, 64, 64);
  const auto find = [&](int H, int C, int K, int R, int stride, ConvPass pass) {
    for (const kernels::ConvPassShape& s : m->conv_pass_shapes())
      if (s.g.H == H && s.g.C == C && s.g.K == K && s.g.R == R && s.g.stride == stride &&
          s.pass == pass)
        return s;
    FAIL("no such shape");
    return kernels::ConvPassShape{};
  };
  const ConvPass fwd = ConvPass::kForward, wgt = ConvPass::kBackwardWeights;
  const auto stem = find(64, 3, 64, 7, 2, wgt);
  CHECK(!stem.bf16_in);
  CHECK(stem.bf16_d_out);
  CHECK(!stem.bf16_out);                       // a weight gradient has no output
  CHECK(find(64, 3, 64, 7, 2, fwd).bf16_out);  // every conv's forward: a batch norm follows
  CHECK(find(8, 128, 512, 1, 1, fwd).bf16_out);
  CHECK(find(16, 64, 64, 1, 1, fwd).bf16_in);   // layer1.0.conv1: the max-pool's bf16 output
  CHECK(find(16, 64, 256, 1, 1, wgt).bf16_in);  // layer1.0.downsample with the conv3s
  CHECK(find(16, 64, 256, 1, 1, wgt).bf16_d_out);
  CHECK(find(16, 256, 64, 1, 1, fwd).bf16_in);  // layer1.1/2.conv1: the block outputs
  CHECK(find(16, 64, 64, 3, 1, wgt).bf16_in);   // conv2: an inner batch norm's
  CHECK(find(8, 128, 512, 1, 1, fwd).bf16_in);  // layer2's conv3
  const auto fc = find(1, 2048, 10, 1, 1, wgt);
  CHECK(!fc.bf16_in);
  CHECK(!fc.bf16_d_out);
  CHECK(!find(1, 2048, 10, 1, 1, fwd).bf16_out);  // the logits stay fp32
  // The block outputs off: the stem's max-pool writes fp32, so layer1.0's conv1 reads fp32 and
  // the shape its downsample shares with the conv3s (bf16 from bn2) takes fp32.
  m->set_bf16_block_outputs(false);
  CHECK(!find(16, 64, 64, 1, 1, fwd).bf16_in);
  CHECK(!find(16, 64, 256, 1, 1, wgt).bf16_in);
  CHECK(find(16, 64, 64, 3, 1, wgt).bf16_in);  // the inner batch norms' hand-over stays
  // Off: nothing handed over, nothing measured so.
  m->set_bf16_handover(false);
  m->set_bf16_conv_outputs(false);
  for (const kernels::ConvPassShape& s : m->conv_pass_shapes()) {
    CHECK(!s.bf16_in);
    CHECK(!s.bf16_d_out);
    CHECK(!s.bf16_out);
  }
  // An fp32 model hands nothing over.
  config.precision = Precision::kFp32;
  auto f = nostrum::model::Model::create(config);
  f->build(2, 64, 64);
  for (const kernels::ConvPassShape& s : f->conv_pass_shapes())
    CHECK(!(s.bf16_in || s.bf16_d_out || s.bf16_out));
}
