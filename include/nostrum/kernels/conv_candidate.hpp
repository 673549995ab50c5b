// A convolution kernel candidate: one way to run one conv pass (forward, backward-data,
// backward-weights), with what it needs (CPU features, precision, shapes), a prepare step once per
// layer shape and pass, and a run per call. The registry (conv_candidates()) lists every candidate
// built in; the measured choice (kernels/conv_choice.hpp) times the eligible ones and each conv
// layer keeps only the chosen ones' prepared kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/kernels/d_in_finisher.hpp"
#include "nostrum/kernels/precision.hpp"
#include "nostrum/kernels/window.hpp"

namespace nostrum::kernels {

enum class ConvPass { kForward, kBackwardData, kBackwardWeights };
inline constexpr ConvPass kConvPasses[] = {ConvPass::kForward, ConvPass::kBackwardData,
                                           ConvPass::kBackwardWeights};

// "forward", "backward_data", "backward_weights" (the names the table and the cache use), in enum
// order (core/enum_names.hpp's parse_enum_name reads them back).
const std::vector<std::string>& conv_pass_names();
const char* conv_pass_name(ConvPass pass);

// One call's tensors, all NHWC activations and (K, C, R, S) weights, fp32 in memory whatever the
// precision (a bf16 candidate rounds while packing). Which ones a pass reads and writes:
//   forward:          out (N,P,Q,K) = conv(in (N,H,W,C), weight)
//   backward_data:    d_in (N,H,W,C) = (or += when accumulate_d_in) from d_out (N,P,Q,K), weight
//   backward_weights: d_weight (K,C,R,S) = (always overwritten) from d_out and in
// The others are null. N may be smaller than the batch the kernel was prepared for (the last,
// partial batch; evaluation): every other size is the prepared geometry's.
struct ConvCall {
  int N = 0;
  const float* in = nullptr;
  const float* weight = nullptr;
  const float* d_out = nullptr;
  float* out = nullptr;
  float* d_in = nullptr;
  float* d_weight = nullptr;
  bool accumulate_d_in = false;
  // Backward passes of a bf16 run only: the output gradient already in bf16 (the batch norm after
  // the conv wrote it so), given only to a kernel whose takes_bf16_d_out(); d_out is then null.
  const uint16_t* d_out_bf16 = nullptr;
  // Forward and backward-weights of a bf16 run only: the input activations already in bf16 (the
  // batch norm before the conv wrote them so), given only to a kernel whose takes_bf16_in(); in is
  // then null.
  const uint16_t* in_bf16 = nullptr;
  // Forward of a bf16 run only: the output written in bf16 here instead of to out (then null),
  // given only to a kernel whose writes_bf16_out() (the batch norm after the conv reads it so).
  uint16_t* out_bf16 = nullptr;
  // Backward-data only: what finishes d_in once the pass has written (or added) it, or null: a
  // kernel whose finishes_d_in() calls it as its rows become final; for any other kernel
  // run_and_finish_d_in calls it once over all rows after run.
  DInFinisher* finish_d_in = nullptr;
  // Shared working memory of at least PreparedConv::scratch_floats() floats (64-byte aligned),
  // shared by every conv layer: nothing in it survives from one call to the next.
  float* scratch = nullptr;
};

// A candidate prepared for one geometry (at the run's batch), pass and precision: everything it
// builds once lives here (packed-weight buffers, a oneDNN primitive and its reordered-weight
// memory, ...). The weights change every step, so a run that needs them reordered reorders them
// on every call, into memory allocated here; that reorder is part of its measured time.
// One prepared kernel serves every layer of its geometry and pass (Model::set_conv_kernels shares
// it; calls never overlap): keep nothing from one call that a later call relies on.
class PreparedConv {
 public:
  virtual ~PreparedConv() = default;
  // Floats of ConvCall::scratch that run needs (0 allowed); asked once, after prepare.
  virtual size_t scratch_floats() const = 0;
  // One call; no allocation after the first call at a given N. Called outside any OpenMP region:
  // it may use the whole pool (omp_get_max_threads()). Same inputs and thread count: same bits.
  virtual void run(const ConvCall& call) = 0;
  // Whether run takes ConvCall::d_out_bf16 (a backward pass on bf16 operands that reads the output
  // gradient only as bf16): the model then has the batch norm write it in bf16, once for both
  // backward passes, instead of each pass rounding an fp32 copy.
  virtual bool takes_bf16_d_out() const { return false; }
  // Whether run takes ConvCall::in_bf16 (a forward or backward-weights pass on bf16 operands that
  // reads the input only as bf16): the model then has the batch norm before the conv write its
  // output in bf16, once for both passes and for its own backward's ReLU mask.
  virtual bool takes_bf16_in() const { return false; }
  // Whether run writes ConvCall::out_bf16 (a forward pass on bf16 operands whose sums can be
  // stored rounded to bf16): the model then keeps the conv's output in bf16 for the batch norm
  // after it (Model::set_bf16_conv_outputs), as PyTorch's autocast does.
  virtual bool writes_bf16_out() const { return false; }
  // Whether run calls ConvCall::finish_d_in itself (a backward-data pass that adds its gradient
  // through a partial hands each partial to it, so the add and the finishing are one pass).
  virtual bool finishes_d_in() const { return false; }
};

// k.run(call), then, where the call has a finish_d_in that k does not call itself, that finisher
// over every row of d_in: how the model runs a backward-data pass.
void run_and_finish_d_in(PreparedConv& k, const ConvCall& call);

// What a bf16 candidate rounds to bf16, and so which error bound it keeps
// (src/kernels/conv_candidates.md, Winograd): the operands of the products (every candidate but
// one), or Winograd's transformed operands (their magnitudes can exceed the operands': a weaker
// bound, tests/engine/ winograd_bound.hpp). fp32 candidates round nothing; they declare kOperands.
enum class ConvRounding { kOperands, kWinogradTransforms };

// A candidate: stateless, one instance in the registry, described by a stable name (in the
// measured table, the cache, result.json and --conv-kernel NAME).
class ConvCandidate {
 public:
  virtual ~ConvCandidate() = default;
  virtual const char* name() const = 0;
  // One line for --help and the docs: the algorithm and what it needs, e.g.
  // "nostrum's direct AVX-512 kernels (AVX512F; K % 16 == 0 forward, ...)".
  virtual const char* description() const = 0;
  // Whether this CPU can run it: read the features table only (nostrum::cpu_features(), which
  // honours the ISA cap), never CPUID directly.
  virtual bool available(const CpuFeatures& cpu) const = 0;
  // Whether, where available, its bf16 products run on AMX tiles on this CPU (the table's AMX_TILE,
  // AMX_BF16 and Linux's tile-data permission): `--precision auto` counts the AMX tile probe only
  // when the run's conv kernels can reach them.
  virtual bool reaches_amx(const CpuFeatures&) const { return false; }
  // What its bf16 passes round (the tests hold each candidate to the bound that follows from it).
  virtual ConvRounding rounding() const { return ConvRounding::kOperands; }
  virtual bool supports(Precision precision) const = 0;
  // Whether it can run this pass of this geometry (its shape limits; g.N is the prepared batch)
  // with the calling thread's pool (omp_get_max_threads(): the run's threads).
  virtual bool fits(const ConvGeometry& g, ConvPass pass) const = 0;
  // Builds the prepared kernel; called only where available, supports and fits all hold. May
  // allocate and take its time (not measured as part of run's time).
  virtual std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                                Precision precision) const = 0;
};

// Every candidate compiled in, in a fixed order (the chooser's tie-break: the earlier wins).
// Adding one: implement ConvCandidate in src/kernels/, add it to the list in
// src/kernels/conv_candidates.cpp (behind its #if when it needs an optional library).
const std::vector<const ConvCandidate*>& conv_candidates();

// The registry's candidate of that name, or nullptr.
const ConvCandidate* find_conv_candidate(const std::string& name);

// Whether the candidate may run a pass of a run at `precision`: it supports that precision, or
// the run is bf16 and the candidate fp32 (it multiplies the operands the model hands it, bf16
// ones widened (prepare_conv_candidate), in fp32, with fp32 weights, so it is at least as
// precise: a bf16 run takes it where it measures faster, as on small channel counts, where
// rounding the operands costs more than the bf16 dot products save).
bool conv_candidate_serves(const ConvCandidate& c, Precision precision);

// available(cpu_features()) && conv_candidate_serves(c, precision) && fits(g, pass).
bool conv_candidate_eligible(const ConvCandidate& c, const ConvGeometry& g, ConvPass pass,
                             Precision precision);

// c.prepare(g, pass, precision), and for an fp32 candidate serving a bf16 run, that kernel behind
// an adapter that takes the bf16 operands the model hands a conv (the input, the output gradient:
// takes_bf16_in and takes_bf16_d_out for the passes that read them) and widens them exactly into
// fp32 in its own part of the scratch before the fp32 kernel runs: the same bits as the fp32
// kernel on the widened values, the widening part of its measured time, and a pass won by an fp32
// kernel no longer keeps the tensors it reads in fp32 for every other reader
// (src/kernels/conv_widening.cpp). Every prepare of the model and the measurement goes through it.
std::unique_ptr<PreparedConv> prepare_conv_candidate(const ConvCandidate& c, const ConvGeometry& g,
                                                     ConvPass pass, Precision precision);

// The candidate today's fixed rule takes for this pass (the direct kernels for small channel
// counts, else the GEMMs, threading by shape: layers/conv2d.hpp's kAuto) at `threads` threads:
// what runs where nothing was measured. Always eligible.
const ConvCandidate& conv_fixed_rule_candidate(const ConvGeometry& g, ConvPass pass,
                                               Precision precision, int threads);

}  // namespace nostrum::kernels
