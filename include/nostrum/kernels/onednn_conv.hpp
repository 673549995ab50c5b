// oneDNN's convolution primitives (Debian's libdnnl, 2.x) on nostrum's layouts: activations and
// their gradients NHWC fp32, weights (K, C, R, S) fp32. No oneDNN type appears outside
// src/kernels/onednn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/d_in_finisher.hpp"
#include "nostrum/kernels/precision.hpp"
#include "nostrum/kernels/window.hpp"

namespace nostrum::kernels {

// The oneDNN that runs: its version ("2.6.3") and the instruction set it dispatches to
// ("avx512_core_bf16", "avx512_core_amx", "avx2", ...: the CPU's best within DNNL_MAX_CPU_ISA).
// nostrum's CPU features table is initialised first, so an ISA cap it sets applies.
struct OnednnLibrary {
  std::string version;
  std::string isa;
};
const OnednnLibrary& onednn_library();

// Whether oneDNN's bf16 convolutions run on bf16 instructions here (AVX512_BF16 or AMX, within the
// cap), not emulated in fp32.
bool onednn_bf16_native();

// One pass of one convolution geometry at one precision: the primitive, the weights' layout it
// chose and the reorders into and out of nostrum's layouts are created once, here; a call runs the
// reorders and the primitive and allocates nothing. Its working memory (oneDNN's scratchpad in
// user mode, the weights in the primitive's layout, the bf16 copies of the operands, ...) is the
// caller's workspace: nothing in it survives from one call to the next, so conv layers share one.
// bf16: the operands (input, weights, output gradient) are rounded to bf16 by the pass's own
// reorders (nearest even), the results (out, d_in, d_weight) come back fp32, summed in fp32. Runs
// on the OpenMP pool at omp_get_max_threads(); oneDNN fixes its work split when a primitive is
// created, so a call at another thread count creates the primitive again (once per change; should
// the new one need more workspace than workspace_bytes() said, it uses memory of its own). Not for
// concurrent calls on one object.
class OnednnConv {
 public:
  // bf16: where the operands the pass reads (the input, the output gradient) come from. kRounded:
  // a call may give them in fp32, rounded into bf16 copies in the workspace (or in bf16, read as
  // they are). kGiven: every call gives them in bf16 (in_bf16, d_out_bf16), so no copies are laid
  // out; a call without them is an Error. The same in fp32 (nothing is rounded there).
  enum class Bf16Operands { kRounded, kGiven };

  // ShapeError for an impossible geometry; OptionError for bf16 where onednn_bf16_native() is
  // false; Error naming the pass and geometry should oneDNN refuse it. workspace_limit: the most
  // the caller's workspace can hold; a primitive needing more uses memory of its own, allocated
  // here (workspace_bytes() is then 0).
  OnednnConv(const ConvGeometry& g, ConvPass pass, Precision precision,
             size_t workspace_limit = SIZE_MAX, Bf16Operands operands = Bf16Operands::kRounded);
  ~OnednnConv();
  OnednnConv(OnednnConv&&) noexcept;
  OnednnConv& operator=(OnednnConv&&) noexcept;

  // Bytes of workspace a call needs (64-byte aligned; 0 allowed, then workspace may be null).
  size_t workspace_bytes() const;

  // kForward: out (N,P,Q,K) = conv(in (N,H,W,C), weight (K,C,R,S)).
  // bf16 only: in_bf16, when given, is the input already in bf16 (NHWC, as in would be rounded)
  // and in is not read; forward and backward-weights take it. out_bf16, when given (and
  // writes_bf16_out()), receives the output in bf16 (the fp32 sums rounded to nearest even by
  // oneDNN) and out is not written.
  void forward(float* out, const float* in, const float* weight, void* workspace,
               const uint16_t* in_bf16 = nullptr, uint16_t* out_bf16 = nullptr);
  // A bf16 forward that can write its output in bf16.
  bool writes_bf16_out() const;
  // kBackwardData: d_in (N,H,W,C) = the input gradient from d_out (N,P,Q,K) and weight, or
  // d_in += it when accumulate (oneDNN 2.x has no sum post-op here: the gradient goes to the
  // workspace and is added).
  // bf16 only: d_out_bf16, when given, is the output gradient already in bf16 (NHWC, as d_out
  // would be rounded) and d_out is not read; both backward passes take it.
  // finish, when given, finishes d_in's rows as they become final (DInFinisher; this call's rows
  // are its rows first_row onwards): with accumulate each image chunk's gradient is handed to it to
  // add, in place of the add.
  void backward_data(float* d_in, const float* d_out, const float* weight, bool accumulate,
                     void* workspace, const uint16_t* d_out_bf16 = nullptr,
                     DInFinisher* finish = nullptr, int64_t first_row = 0);
  // kBackwardWeights: d_weight (K,C,R,S) OVERWRITTEN from d_out (N,P,Q,K) and in (N,H,W,C).
  void backward_weights(float* d_weight, const float* d_out, const float* in, void* workspace,
                        const uint16_t* d_out_bf16 = nullptr, const uint16_t* in_bf16 = nullptr);

  // The implementation oneDNN chose for the convolution, e.g. "brgconv:avx512_core_bf16";
  // "ref:any" is its slow reference code.
  std::string implementation() const;
  ConvPass pass() const;
  const ConvGeometry& geometry() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nostrum::kernels
