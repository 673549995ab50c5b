// prepare_conv_candidate (kernels/conv_candidate.hpp): an fp32 candidate serving a bf16 run behind
// an adapter that widens the bf16 operands it is handed (the input of a forward or weight-gradient
// pass, the output gradient of a backward pass) into fp32 scratch, then runs the fp32 kernel.
#include <omp.h>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

namespace {

// dst[i] = src[i] widened (exact): memory-bound, the pool's threads each a contiguous share.
void widen(float* dst, const uint16_t* src, size_t count) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_fp32(src[i]);
}

class WidenedConv final : public PreparedConv {
 public:
  WidenedConv(std::unique_ptr<PreparedConv> inner, const ConvGeometry& g, ConvPass pass)
      : inner_(std::move(inner)), g_(g), pass_(pass) {}
  // Its widened operands first (each slice 64-byte aligned), then the fp32 kernel's own scratch.
  size_t scratch_floats() const override {
    return in_slice(g_) + d_out_slice(g_) + inner_->scratch_floats();
  }
  bool takes_bf16_in() const override { return pass_ != ConvPass::kBackwardData; }
  bool takes_bf16_d_out() const override { return pass_ != ConvPass::kForward; }
  bool finishes_d_in() const override { return inner_->finishes_d_in(); }
  void run(const ConvCall& call) override {
    ConvGeometry g = g_;
    g.N = call.N;
    ConvCall c = call;
    float* free = call.scratch;
    if (call.in_bf16) {
      widen(free, call.in_bf16, g.input_floats());
      c.in = free, c.in_bf16 = nullptr;
    }
    free += in_slice(g);
    if (call.d_out_bf16) {
      widen(free, call.d_out_bf16, g.output_floats());
      c.d_out = free, c.d_out_bf16 = nullptr;
    }
    c.scratch = free + d_out_slice(g);
    inner_->run(c);
  }

 private:
  size_t in_slice(const ConvGeometry& g) const {
    return takes_bf16_in() ? Arena::padded(g.input_floats()) : 0;
  }
  size_t d_out_slice(const ConvGeometry& g) const {
    return takes_bf16_d_out() ? Arena::padded(g.output_floats()) : 0;
  }

  std::unique_ptr<PreparedConv> inner_;
  ConvGeometry g_;
  ConvPass pass_;
};

}  // namespace

std::unique_ptr<PreparedConv> prepare_conv_candidate(const ConvCandidate& c, const ConvGeometry& g,
                                                     ConvPass pass, Precision precision) {
  std::unique_ptr<PreparedConv> kernel = c.prepare(g, pass, precision);
  if (precision != Precision::kBf16 || c.supports(Precision::kBf16)) return kernel;
  return std::make_unique<WidenedConv>(std::move(kernel), g, pass);
}

}  // namespace nostrum::kernels
