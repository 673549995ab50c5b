// The oneDNN candidates: a PreparedConv holds one OnednnConv per batch size it has been called at
// (the prepared batch, then the last partial batch or evaluation's), each created on its first
// call. bf16: a pass whose bf16 operand copies would exceed a budget runs chunk by chunk of whole
// images (NHWC: a chunk is contiguous), so those copies stay small in the shared conv scratch; a
// call that gives every operand the pass reads in bf16 needs no copies and runs the whole batch
// on one primitive (oneDNN's AMX convolutions lose up to a third on a batch cut in four).
#include "nostrum/kernels/onednn_candidates.hpp"

#include <algorithm>
#include <map>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/onednn_conv.hpp"
#include "parallel_add.hpp"

namespace nostrum::kernels {

namespace {

// Bytes of one image's bf16 operand copies in a pass (the input, the output gradient or both);
// 0 in fp32, where oneDNN reads nostrum's tensors as they are.
size_t bf16_copy_bytes_per_image(const ConvGeometry& g, ConvPass pass, Precision precision) {
  if (precision != Precision::kBf16) return 0;
  const size_t in = size_t(g.H) * g.W * g.C, out = size_t(g.P()) * g.Q() * g.K;
  const size_t words = pass == ConvPass::kForward        ? in
                       : pass == ConvPass::kBackwardData ? out
                                                         : in + out;
  return words * 2;
}

class PreparedOnednn final : public PreparedConv {
 public:
  PreparedOnednn(const ConvGeometry& g, ConvPass pass, Precision precision, size_t copy_budget)
      : g_(g), pass_(pass), precision_(precision) {
    const size_t per_image = bf16_copy_bytes_per_image(g, pass, precision);
    const int most = per_image ? int(std::clamp<size_t>(copy_budget / per_image, 1, g.N)) : g.N;
    chunks_ = (g.N + most - 1) / most;
    ConvGeometry first = g;
    first.N = chunk_images(g.N, 0);  // the largest chunk
    const OnednnConv& conv =
        convs_.emplace(first.N, OnednnConv(first, pass_, precision)).first->second;
    writes_bf16_out_ = conv.writes_bf16_out();
    // A chunked weight gradient sums its chunks' gradients through a buffer after the workspace.
    partial_floats_ =
        chunks_ > 1 && pass == ConvPass::kBackwardWeights ? Arena::padded(weight_floats()) : 0;
    conv_floats_ = Arena::padded((conv.workspace_bytes() + sizeof(float) - 1) / sizeof(float));
    scratch_floats_ = conv_floats_ + partial_floats_;
  }
  size_t scratch_floats() const override { return scratch_floats_; }
  bool takes_bf16_d_out() const override {
    return precision_ == Precision::kBf16 && pass_ != ConvPass::kForward;
  }
  bool takes_bf16_in() const override {
    return precision_ == Precision::kBf16 && pass_ != ConvPass::kBackwardData;
  }
  bool writes_bf16_out() const override { return writes_bf16_out_; }
  bool finishes_d_in() const override { return pass_ == ConvPass::kBackwardData; }
  int chunks() const { return chunks_; }
  int last_run_primitives() const { return last_run_primitives_; }
  void run(const ConvCall& c) override {
    // A call giving every operand its pass reads in bf16 makes no copies: its whole batch on one
    // primitive built for that; else the prepared batch's chunking (a partial batch: as many
    // chunks, smaller).
    OnednnConv* whole = chunks_ > 1 ? given_operands_primitive(c) : nullptr;
    const int chunks = whole ? 1 : std::min(chunks_, c.N);
    last_run_primitives_ = chunks;
    const size_t in_image = size_t(g_.H) * g_.W * g_.C, out_image = size_t(g_.P()) * g_.Q() * g_.K;
    float* partial = c.scratch + conv_floats_;
    for (int i = 0, n0 = 0; i < chunks; ++i) {
      const int n = split_images(c.N, chunks, i);
      OnednnConv& conv = whole ? *whole : at(convs_, n, OnednnConv::Bf16Operands::kRounded);
      switch (pass_) {
        case ConvPass::kForward:
          conv.forward(offset(c.out, n0 * out_image), offset(c.in, n0 * in_image), c.weight,
                       c.scratch, offset(c.in_bf16, n0 * in_image),
                       offset(c.out_bf16, n0 * out_image));
          break;
        case ConvPass::kBackwardData:
          conv.backward_data(c.d_in + n0 * in_image, offset(c.d_out, n0 * out_image), c.weight,
                             c.accumulate_d_in, c.scratch, offset(c.d_out_bf16, n0 * out_image),
                             c.finish_d_in, int64_t(n0) * g_.H * g_.W);
          break;
        case ConvPass::kBackwardWeights:
          conv.backward_weights(i == 0 ? c.d_weight : partial, offset(c.d_out, n0 * out_image),
                                offset(c.in, n0 * in_image), c.scratch,
                                offset(c.d_out_bf16, n0 * out_image),
                                offset(c.in_bf16, n0 * in_image));
          if (i > 0) parallel_add(c.d_weight, partial, int64_t(weight_floats()));
          break;
      }
      n0 += n;
    }
  }

 private:
  size_t weight_floats() const { return size_t(g_.K) * g_.C * g_.R * g_.S; }
  // The primitive for the call's whole batch reading its bf16 operands: null unless the call
  // gives in bf16 every operand the pass reads, or where that primitive cannot write the bf16
  // output the call wants.
  OnednnConv* given_operands_primitive(const ConvCall& c) {
    if (precision_ != Precision::kBf16) return nullptr;
    const bool given = pass_ == ConvPass::kForward        ? c.in_bf16 != nullptr
                       : pass_ == ConvPass::kBackwardData ? c.d_out_bf16 != nullptr
                                                          : c.in_bf16 && c.d_out_bf16;
    if (!given) return nullptr;
    OnednnConv& conv = at(given_, c.N, OnednnConv::Bf16Operands::kGiven);
    return c.out_bf16 && !conv.writes_bf16_out() ? nullptr : &conv;
  }
  // p + n, null staying null (an operand comes as fp32 or as bf16, not both).
  template <class T>
  static T* offset(T* p, size_t n) {
    return p ? p + n : nullptr;
  }
  // Images of chunk i when N images go in `chunks` chunks: N / chunks, the first N % chunks one
  // more (so at most two primitives per batch size).
  static int split_images(int N, int chunks, int i) { return N / chunks + (i < N % chunks); }
  int chunk_images(int N, int i) const { return split_images(N, chunks_, i); }
  // The primitive for N images in `primitives` (convs_ or given_), created on first use; one
  // whose workspace would not fit the scratch before the partial buffer uses its own (OnednnConv
  // allocates it once, on creation).
  OnednnConv& at(std::map<int, OnednnConv>& primitives, int N, OnednnConv::Bf16Operands operands) {
    auto it = primitives.find(N);
    if (it != primitives.end()) return it->second;
    ConvGeometry g = g_;
    g.N = N;
    return primitives
        .emplace(N, OnednnConv(g, pass_, precision_, conv_floats_ * sizeof(float), operands))
        .first->second;
  }

  ConvGeometry g_;
  ConvPass pass_;
  Precision precision_;
  int chunks_ = 1;
  int last_run_primitives_ = 0;
  bool writes_bf16_out_ = false;
  size_t conv_floats_ = 0, partial_floats_ = 0, scratch_floats_ = 0;
  std::map<int, OnednnConv> convs_;
  // By batch size: the primitives for calls giving their bf16 operands (chunked passes only).
  std::map<int, OnednnConv> given_;
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
  // oneDNN dispatches its bf16 primitives to avx512_core_amx where the CPU has the tiles and
  // Linux granted them (DNNL_MAX_CPU_ISA follows NOSTRUM_MAX_ISA, which clears the table's bits).
  bool reaches_amx(const CpuFeatures& cpu) const override {
    return precision_ == Precision::kBf16 && cpu.amx_tiles();
  }
  bool supports(Precision p) const override { return p == precision_; }
  bool fits(const ConvGeometry&, ConvPass) const override { return true; }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return std::make_unique<PreparedOnednn>(g, pass, precision_, kOnednnBf16CopyBudgetBytes);
  }

 private:
  Precision precision_;
};

}  // namespace

std::unique_ptr<PreparedConv> prepare_onednn(const ConvGeometry& g, ConvPass pass,
                                             Precision precision, size_t copy_budget_bytes,
                                             int* chunks) {
  auto prepared = std::make_unique<PreparedOnednn>(g, pass, precision, copy_budget_bytes);
  if (chunks) *chunks = prepared->chunks();
  return prepared;
}

int onednn_last_run_primitives(const PreparedConv& prepared) {
  const auto* onednn = dynamic_cast<const PreparedOnednn*>(&prepared);
  NOSTRUM_CHECK(onednn != nullptr, Error, "not a oneDNN candidate's prepared kernel",
                "onednn_last_run_primitives");
  return onednn->last_run_primitives();
}

const ConvCandidate& onednn_fp32_candidate() {
  static const OnednnCandidate candidate(Precision::kFp32);
  return candidate;
}

const ConvCandidate& onednn_bf16_candidate() {
  static const OnednnCandidate candidate(Precision::kBf16);
  return candidate;
}

}  // namespace nostrum::kernels
