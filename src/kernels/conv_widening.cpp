// prepare_conv_candidate (kernels/conv_candidate.hpp): an fp32 candidate serving a bf16 run behind
// an adapter that widens the bf16 operands it is handed (the input of a forward or weight-gradient
// pass, the output gradient of a backward pass) into fp32 scratch, then runs the fp32 kernel.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

namespace {

// dst[i] = src[i] as fp32, exactly (a bf16 value is the upper half of the fp32 one): memory-bound,
// the pool's threads each a contiguous share.
void widen(float* dst, const uint16_t* src, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t u = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &u, sizeof u);
  }
}

int64_t input_floats(const ConvGeometry& g, int N) {
  return int64_t(N) * g.H * g.W * g.C;
}

int64_t output_floats(const ConvGeometry& g, int N) {
  return int64_t(N) * g.P() * g.Q() * g.K;
}

class WidenedConv final : public PreparedConv {
 public:
  WidenedConv(std::unique_ptr<PreparedConv> inner, const ConvGeometry& g, ConvPass pass)
      : inner_(std::move(inner)), g_(g), pass_(pass) {}
  // Its widened operands first (each slice 64-byte aligned), then the fp32 kernel's own scratch.
  size_t scratch_floats() const override {
    return in_slice(g_.N) + d_out_slice(g_.N) + inner_->scratch_floats();
  }
  bool takes_bf16_in() const override { return pass_ != ConvPass::kBackwardData; }
  bool takes_bf16_d_out() const override { return pass_ != ConvPass::kForward; }
  void run(const ConvCall& call) override {
    ConvCall c = call;
    float* free = call.scratch;
    if (call.in_bf16) {
      widen(free, call.in_bf16, input_floats(g_, call.N));
      c.in = free, c.in_bf16 = nullptr;
    }
    free += in_slice(call.N);
    if (call.d_out_bf16) {
      widen(free, call.d_out_bf16, output_floats(g_, call.N));
      c.d_out = free, c.d_out_bf16 = nullptr;
    }
    free += d_out_slice(call.N);
    c.scratch = free;
    inner_->run(c);
  }

 private:
  size_t in_slice(int N) const {
    return takes_bf16_in() ? Arena::padded(size_t(input_floats(g_, N))) : 0;
  }
  size_t d_out_slice(int N) const {
    return takes_bf16_d_out() ? Arena::padded(size_t(output_floats(g_, N))) : 0;
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
