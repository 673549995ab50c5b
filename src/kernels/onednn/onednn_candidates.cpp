// The oneDNN candidates: a PreparedConv holds one OnednnConv per batch size it has been called at
// (the prepared batch, then the last partial batch or evaluation's), each created on its first
// call.
#include "nostrum/kernels/onednn_candidates.hpp"

#include <map>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/onednn_conv.hpp"

namespace nostrum::kernels {

namespace {

class PreparedOnednn final : public PreparedConv {
 public:
  PreparedOnednn(const ConvGeometry& g, ConvPass pass, Precision precision)
      : g_(g), pass_(pass), precision_(precision) {
    const OnednnConv& conv = convs_.emplace(g.N, OnednnConv(g, pass_, precision)).first->second;
    scratch_floats_ = Arena::padded((conv.workspace_bytes() + sizeof(float) - 1) / sizeof(float));
  }
  size_t scratch_floats() const override { return scratch_floats_; }
  void run(const ConvCall& c) override {
    OnednnConv& conv = at(c.N);
    switch (pass_) {
      case ConvPass::kForward:
        conv.forward(c.out, c.in, c.weight, c.scratch);
        break;
      case ConvPass::kBackwardData:
        conv.backward_data(c.d_in, c.d_out, c.weight, c.accumulate_d_in, c.scratch);
        break;
      case ConvPass::kBackwardWeights:
        conv.backward_weights(c.d_weight, c.d_out, c.in, c.scratch);
        break;
    }
  }

 private:
  // The primitive for batch N; one of a smaller batch whose workspace would not fit the shared
  // scratch uses its own (OnednnConv allocates it once, on creation).
  OnednnConv& at(int N) {
    auto it = convs_.find(N);
    if (it != convs_.end()) return it->second;
    ConvGeometry g = g_;
    g.N = N;
    return convs_.emplace(N, OnednnConv(g, pass_, precision_, scratch_floats_ * sizeof(float)))
        .first->second;
  }

  ConvGeometry g_;
  ConvPass pass_;
  Precision precision_;
  size_t scratch_floats_ = 0;
  std::map<int, OnednnConv> convs_;
};

class OnednnCandidate final : public ConvCandidate {
 public:
  explicit OnednnCandidate(Precision precision) : precision_(precision) {}
  const char* name() const override {
    return precision_ == Precision::kFp32 ? "onednn" : "onednn_bf16";
  }
  const char* description() const override {
    return precision_ == Precision::kFp32
               ? "oneDNN 2.x convolution primitives, fp32 (any CPU; its best ISA within "
                 "DNNL_MAX_CPU_ISA; weights reordered to its layout on every call)"
               : "oneDNN 2.x convolution primitives, bf16 operands rounded by its reorders, fp32 "
                 "results (AVX512_BF16, or AMX tiles where granted)";
  }
  bool available(const CpuFeatures& cpu) const override {
    return precision_ == Precision::kFp32 || (cpu.avx512_bf16 && onednn_bf16_native());
  }
  bool supports(Precision p) const override { return p == precision_; }
  bool fits(const ConvGeometry&, ConvPass) const override { return true; }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return std::make_unique<PreparedOnednn>(g, pass, precision_);
  }

 private:
  Precision precision_;
};

}  // namespace

const ConvCandidate& onednn_fp32_candidate() {
  static const OnednnCandidate candidate(Precision::kFp32);
  return candidate;
}

const ConvCandidate& onednn_bf16_candidate() {
  static const OnednnCandidate candidate(Precision::kBf16);
  return candidate;
}

}  // namespace nostrum::kernels
