// The convolution candidates built in (nostrum's direct AVX-512 kernels, im2col / 1x1 + OpenBLAS
// SGEMM in both threadings, the weight gradients on nostrum's fp32 GEMM in both threadings, the
// bf16 GEMM on vdpbf16ps and on AMX tiles, each in both threadings, and per thread with the input's
// columns as the rows of a weight gradient (bf16, and fp32 for a 1x1); the pixel-taps GEMMs of
// small maps from kernels/pixel_taps_conv; oneDNN's fp32 and bf16 primitives from kernels/onednn)
// and the registry that lists them.
#include <omp.h>

#include <string>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/direct_conv.hpp"
#include "nostrum/kernels/onednn_candidates.hpp"
#include "nostrum/kernels/pixel_taps_conv.hpp"
#include "nostrum/kernels/winograd_conv.hpp"
#include "nostrum/layers/conv2d.hpp"

namespace nostrum::kernels {

const std::vector<std::string>& conv_pass_names() {
  static const std::vector<std::string> names = {"forward", "backward_data", "backward_weights"};
  return names;
}

const char* conv_pass_name(ConvPass pass) {
  return conv_pass_names()[int(pass)].c_str();
}

namespace {

// ---- the direct AVX-512 kernels (kernels/direct_conv.hpp) ----

class PreparedDirect final : public PreparedConv {
 public:
  PreparedDirect(const ConvGeometry& g, ConvPass pass) : g_(g), pass_(pass) {}
  size_t scratch_floats() const override {
    return pass_ == ConvPass::kBackwardWeights ? 0 : Arena::padded(direct_conv_packed_floats(g_));
  }
  void run(const ConvCall& c) override {
    ConvGeometry g = g_;
    g.N = c.N;
    switch (pass_) {
      case ConvPass::kForward:
        direct_conv_forward(c.out, c.in, c.weight, g, c.scratch);
        break;
      case ConvPass::kBackwardData:
        direct_conv_backward_data(c.d_in, c.d_out, c.weight, g, c.scratch, c.accumulate_d_in);
        break;
      case ConvPass::kBackwardWeights:
        direct_conv_backward_weights(c.d_weight, c.d_out, c.in, g);
        break;
    }
  }

 private:
  ConvGeometry g_;
  ConvPass pass_;
};

class DirectCandidate final : public ConvCandidate {
 public:
  const char* name() const override { return "direct_avx512"; }
  const char* description() const override {
    return "nostrum's direct AVX-512 kernels, fp32 (AVX512F; stride 1 or 2; K % 16 == 0 for "
           "forward and backward-weights, C % 16 == 0 for backward-data)";
  }
  bool available(const CpuFeatures& cpu) const override { return cpu.avx512f; }
  bool supports(Precision p) const override { return p == Precision::kFp32; }
  bool fits(const ConvGeometry& g, ConvPass pass) const override {
    switch (pass) {
      case ConvPass::kForward:
        return direct_conv_forward_fits(g);
      case ConvPass::kBackwardData:
        return direct_conv_backward_data_fits(g);
      case ConvPass::kBackwardWeights:
        return direct_conv_backward_weights_fits(g);
    }
    return false;
  }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return std::make_unique<PreparedDirect>(g, pass);
  }
};

// ---- the GEMM path of layers/conv2d (im2col tiles or the 1x1 activations as columns) ----

class PreparedGemm final : public PreparedConv {
 public:
  PreparedGemm(const ConvGeometry& g, ConvPass pass, const layers::ConvOptions& options)
      : g_(g), pass_(pass), options_(options) {}
  size_t scratch_floats() const override { return layers::conv2d_scratch_floats(g_, options_); }
  // The bf16 GEMM's backward passes read the output gradient as their A operand.
  bool takes_bf16_d_out() const override {
    return options_.precision == Precision::kBf16 && pass_ != ConvPass::kForward;
  }
  // ... and the forward and weight-gradient passes read the input activations (A, B).
  bool takes_bf16_in() const override {
    return options_.precision == Precision::kBf16 && pass_ != ConvPass::kBackwardData;
  }
  void run(const ConvCall& c) override {
    ConvGeometry g = g_;
    g.N = c.N;
    layers::ConvOptions o = options_;
    o.d_out_bf16 = c.d_out_bf16;
    o.in_bf16 = c.in_bf16;
    switch (pass_) {
      case ConvPass::kForward:
        layers::conv2d_forward(c.out, c.in, c.weight, g, c.scratch, o);
        break;
      case ConvPass::kBackwardData:
        o.accumulate_d_in = c.accumulate_d_in;
        layers::conv2d_backward_data(c.d_in, c.d_out, c.weight, g, c.scratch, o);
        break;
      case ConvPass::kBackwardWeights:
        layers::conv2d_backward_weights(c.d_weight, c.d_out, c.in, g, c.scratch, o);
        break;
    }
  }

 private:
  ConvGeometry g_;
  ConvPass pass_;
  layers::ConvOptions options_;
};

class GemmCandidate final : public ConvCandidate {
 public:
  GemmCandidate(const char* name, const char* description, Precision precision,
                layers::ConvThreading threading, Bf16Engine engine = Bf16Engine::kVdpbf16ps,
                bool nostrum_fp32 = false, bool input_rows = false)
      : name_(name),
        description_(description),
        precision_(precision),
        threading_(threading),
        engine_(engine),
        nostrum_fp32_(nostrum_fp32),
        input_rows_(input_rows) {}
  const char* name() const override { return name_; }
  const char* description() const override { return description_; }
  // fp32: OpenBLAS everywhere, nostrum's fp32 GEMM with AVX512F. bf16: AVX512_BF16 (the packing,
  // and the vdpbf16ps engine), and for the AMX engine AMX_TILE, AMX_BF16 and Linux's tile-data
  // permission (bf16_amx_available(), read from `cpu`).
  bool available(const CpuFeatures& cpu) const override {
    if (precision_ == Precision::kFp32) return !nostrum_fp32_ || cpu.avx512f;
    return cpu.avx512_bf16 && (engine_ != Bf16Engine::kAmx || cpu.amx_tiles());
  }
  bool reaches_amx(const CpuFeatures&) const override { return engine_ == Bf16Engine::kAmx; }
  bool supports(Precision p) const override { return p == precision_; }
  // Every shape; the per-thread variant only where it really runs per-thread tiles at the pool's
  // thread count (elsewhere it would run exactly as the shared one: not worth measuring twice);
  // nostrum's fp32 GEMM only for a 1x1 conv's weight gradient (and the classifier's): the other
  // passes would run OpenBLAS's, and on im2col columns (3x3, 7x7) it measured 0.4-0.9x the best
  // candidate on every ResNet-50 shape (AMD Zen 4, tools/bench/README.md): not worth the time
  // its measurement would take there. The input-rows weight gradient only where it differs from
  // the plain one (layers::conv2d_weight_gradient_input_rows_fits).
  bool fits(const ConvGeometry& g, ConvPass pass) const override {
    if (nostrum_fp32_ && (pass != ConvPass::kBackwardWeights || g.R * g.S != 1)) return false;
    if (input_rows_ &&
        (pass != ConvPass::kBackwardWeights || !layers::conv2d_weight_gradient_input_rows_fits(g)))
      return false;
    return threading_ != layers::ConvThreading::kPerThread ||
           layers::conv2d_runs_per_thread(g, pass, omp_get_max_threads(), options());
  }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return std::make_unique<PreparedGemm>(g, pass, options());
  }

  layers::ConvOptions options() const {
    layers::ConvOptions o;
    o.algorithm = layers::ConvAlgorithm::kGemm;
    o.threading = threading_;
    o.precision = precision_;
    o.bf16_engine = engine_;
    o.nostrum_fp32_gemm = nostrum_fp32_;
    o.weight_gradient_input_rows = input_rows_;
    return o;
  }

 private:
  const char* name_;
  const char* description_;
  Precision precision_;
  layers::ConvThreading threading_;
  Bf16Engine engine_;
  bool nostrum_fp32_;
  bool input_rows_;
};

const DirectCandidate kDirect;
const GemmCandidate kBlasShared(
    "gemm_openblas",
    "im2col (or the 1x1 activations) + OpenBLAS SGEMM, fp32, one threaded GEMM per tile of rows",
    Precision::kFp32, layers::ConvThreading::kSharedGemm);
const GemmCandidate kBlasPerThread(
    "gemm_openblas_per_thread",
    "im2col + OpenBLAS SGEMM, fp32, each thread its own tiles with single-threaded GEMMs (fits "
    "where that differs from gemm_openblas: more than 1 thread, per-thread tiles within the "
    "column budget)",
    Precision::kFp32, layers::ConvThreading::kPerThread);
const GemmCandidate kFp32Shared(
    "gemm_fp32_avx512",
    "the 1x1 activations (or their stride-2 rows) + nostrum's fp32 GEMM on AVX-512F tiles "
    "(AVX512F), 1x1 backward-weights only, one threaded GEMM per tile of rows",
    Precision::kFp32, layers::ConvThreading::kSharedGemm, Bf16Engine::kVdpbf16ps, true);
const GemmCandidate kFp32PerThread(
    "gemm_fp32_avx512_per_thread",
    "the 1x1 activations + nostrum's fp32 GEMM (AVX512F), 1x1 backward-weights only, each "
    "thread its own tiles (fits where that differs from gemm_fp32_avx512)",
    Precision::kFp32, layers::ConvThreading::kPerThread, Bf16Engine::kVdpbf16ps, true);
const GemmCandidate kFp32PerThreadInputRows(
    "gemm_fp32_avx512_per_thread_in_rows",
    "a 1x1 weight gradient with fewer output than input channels on nostrum's fp32 GEMM "
    "(AVX512F), each thread its own tiles, the input's channels as the GEMM's rows (d_weight^T = "
    "in^T x d_out, transposed as the threads' partials are summed)",
    Precision::kFp32, layers::ConvThreading::kPerThread, Bf16Engine::kVdpbf16ps, true, true);
const GemmCandidate kBf16Shared(
    "gemm_bf16",
    "im2col + nostrum's bf16 GEMM (vdpbf16ps, fp32 sums; AVX512_BF16), one GEMM per tile of rows",
    Precision::kBf16, layers::ConvThreading::kSharedGemm);
const GemmCandidate kBf16PerThread(
    "gemm_bf16_per_thread",
    "im2col + nostrum's bf16 GEMM (AVX512_BF16), each thread its own tiles (fits where that "
    "differs from gemm_bf16: more than 1 thread, per-thread tiles within the column budget)",
    Precision::kBf16, layers::ConvThreading::kPerThread);
const GemmCandidate kBf16PerThreadInputRows(
    "gemm_bf16_per_thread_in_rows",
    "a weight gradient with fewer output channels than R*S*C on nostrum's bf16 GEMM (AVX512_BF16), "
    "each thread its own tiles, the input's columns (or the 1x1 input itself) as the GEMM's rows "
    "(d_weight^T = columns^T x d_out, transposed as the threads' partials are summed)",
    Precision::kBf16, layers::ConvThreading::kPerThread, Bf16Engine::kVdpbf16ps, false, true);
const GemmCandidate kBf16AmxShared(
    "gemm_bf16_amx",
    "im2col + nostrum's bf16 GEMM on AMX tiles (tdpbf16ps, fp32 sums; AMX_TILE, AMX_BF16 and "
    "Linux's tile-data permission), one GEMM per tile of rows",
    Precision::kBf16, layers::ConvThreading::kSharedGemm, Bf16Engine::kAmx);
const GemmCandidate kBf16AmxPerThread(
    "gemm_bf16_amx_per_thread",
    "im2col + nostrum's bf16 GEMM on AMX tiles, each thread its own tiles (fits where that "
    "differs from gemm_bf16_amx: more than 1 thread, per-thread tiles within the column budget)",
    Precision::kBf16, layers::ConvThreading::kPerThread, Bf16Engine::kAmx);

}  // namespace

const std::vector<const ConvCandidate*>& conv_candidates() {
  // Order: the tie-break of the chooser. Optional libraries add theirs behind their #if.
  static const std::vector<const ConvCandidate*> list = {&kDirect,
                                                         &kBlasShared,
                                                         &kBlasPerThread,
                                                         &kFp32Shared,
                                                         &kFp32PerThread,
                                                         &kFp32PerThreadInputRows,
                                                         &kBf16Shared,
                                                         &kBf16PerThread,
                                                         &kBf16PerThreadInputRows,
                                                         &kBf16AmxShared,
                                                         &kBf16AmxPerThread,
                                                         &pixel_taps_fp32_candidate(),
                                                         &pixel_taps_bf16_candidate(),
                                                         &winograd_bf16_candidate(),
                                                         &onednn_fp32_candidate(),
                                                         &onednn_bf16_candidate()};
  return list;
}

const ConvCandidate* find_conv_candidate(const std::string& name) {
  for (const ConvCandidate* c : conv_candidates())
    if (name == c->name()) return c;
  return nullptr;
}

void run_and_finish_d_in(PreparedConv& k, const ConvCall& call) {
  k.run(call);
  if (call.finish_d_in && !k.finishes_d_in())
    call.finish_d_in->finish(nullptr, 0, call.finish_d_in->rows());
}

bool conv_candidate_serves(const ConvCandidate& c, Precision precision) {
  return c.supports(precision) || (precision == Precision::kBf16 && c.supports(Precision::kFp32));
}

bool conv_candidate_eligible(const ConvCandidate& c, const ConvGeometry& g, ConvPass pass,
                             Precision precision) {
  return c.available(cpu_features()) && conv_candidate_serves(c, precision) && c.fits(g, pass);
}

const ConvCandidate& conv_fixed_rule_candidate(const ConvGeometry& g, ConvPass pass,
                                               Precision precision, int threads) {
  if (precision == Precision::kFp32 && layers::conv2d_fixed_rule_direct(g, pass, precision))
    return kDirect;
  layers::ConvOptions o;
  o.precision = precision;
  const bool per_thread = layers::conv2d_runs_per_thread(g, pass, threads, o);
  if (precision == Precision::kBf16)
    return per_thread ? static_cast<const ConvCandidate&>(kBf16PerThread) : kBf16Shared;
  return per_thread ? static_cast<const ConvCandidate&>(kBlasPerThread) : kBlasShared;
}

}  // namespace nostrum::kernels
