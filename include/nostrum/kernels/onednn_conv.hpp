// oneDNN's convolution primitives (Debian's libdnnl, 2.x) on nostrum's layouts: activations and
// their gradients NHWC fp32, weights (K, C, R, S) fp32. No oneDNN type appears outside src/kernels/onednn.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

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

// The three passes of a convolution.
enum class OnednnPass { kForward, kBackwardData, kBackwardWeights };
const char* onednn_pass_name(OnednnPass pass);  // "forward" | "backward-data" | "backward-weights"

// One pass of one convolution geometry at one precision: the primitive, the weights' layout it
// chose and the reorders into and out of nostrum's layouts are created once, here; a call runs the
// reorders and the primitive and allocates nothing. bf16: the operands (input, weights, output
// gradient) are rounded to bf16 by the pass's own reorders (nearest even), the results (out, d_in,
// d_weight) come back fp32, summed in fp32. Runs on the OpenMP pool at omp_get_max_threads();
// oneDNN fixes its work split when a primitive is created, so a call at another thread count
// creates the primitive again (once per change). Not for concurrent calls on one object.
class OnednnConv {
 public:
  // ShapeError for an impossible geometry; OptionError for bf16 where onednn_bf16_native() is
  // false. accumulate_d_in (backward-data only): d_in += the gradient instead of d_in =.
  OnednnConv(const ConvGeometry& g, OnednnPass pass, Precision precision,
             bool accumulate_d_in = false);
  ~OnednnConv();
  OnednnConv(OnednnConv&&) noexcept;
  OnednnConv& operator=(OnednnConv&&) noexcept;

  // kForward: out (N,P,Q,K) = conv(in (N,H,W,C), weight (K,C,R,S)).
  void forward(float* out, const float* in, const float* weight);
  // kBackwardData: d_in (N,H,W,C) = (or +=) the input gradient from d_out (N,P,Q,K), weight.
  void backward_data(float* d_in, const float* d_out, const float* weight);
  // kBackwardWeights: d_weight (K,C,R,S) OVERWRITTEN from d_out (N,P,Q,K) and in (N,H,W,C).
  void backward_weights(float* d_weight, const float* d_out, const float* in);

  // Bytes this object holds beside the caller's tensors: oneDNN's scratchpad (user mode, owned
  // here), the weights in the primitive's layout, the bf16 copies of the operands, the fp32
  // gradient that backward-data adds into d_in when it accumulates, the weight gradient in the
  // primitive's layout.
  size_t buffer_bytes() const;
  // The implementation oneDNN chose for the convolution, e.g. "brgconv:avx512_core_bf16";
  // "ref:any" is its slow reference code.
  std::string implementation() const;
  OnednnPass pass() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nostrum::kernels
