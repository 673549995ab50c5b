// Conv2d on NHWC activations with PyTorch-layout weights (K, C, R, S), no bias (ResNets use none).
// out (N, P, Q, K), P and Q by kernels::window_output_size. The scratch buffer (im2col columns,
// packed weights, in bf16 the weights' bf16 words) is shared by all conv layers and sized once by
// conv2d_scratch_floats. Beyond it, the direct kernels' per-thread buffers
// (kernels/direct_conv.hpp) and, in bf16, the GEMM's per-thread words of the rounded A operand
// (kernels/bf16.hpp) grow on the first call of a larger shape and are reused after.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/window.hpp"

namespace nostrum::layers {

using kernels::ConvGeometry;  // (N, H, W, C) in, K out, R x S kernel, stride, pad

// Floats of scratch that conv2d_forward/backward need for this geometry (0 allowed).
size_t conv2d_scratch_floats(const ConvGeometry& g);

// out (N,P,Q,K) = conv(in (N,H,W,C), weight (K,C,R,S)).
void conv2d_forward(float* out, const float* in, const float* weight, const ConvGeometry& g,
                    float* scratch);

// Given d_out (N,P,Q,K): d_weight (K,C,R,S) is OVERWRITTEN with the weight gradient; d_in (N,H,W,C)
// is OVERWRITTEN with the input gradient unless d_in is nullptr (the stem needs none).
void conv2d_backward(float* d_in, float* d_weight, const float* d_out, const float* in,
                     const float* weight, const ConvGeometry& g, float* scratch);

// ---- tuning knobs (the functions above use the defaults) ----
// How a conv uses the OpenMP pool: one threaded GEMM per tile of output rows, or each thread its
// own tiles with single-threaded GEMMs. kAuto picks per shape and per pass. Results are
// bit-reproducible for a fixed choice and thread count.
enum class ConvThreading { kAuto, kSharedGemm, kPerThread };

// Which algorithm a pass uses: the direct AVX-512 kernels (kernels/direct_conv.hpp) where the CPU
// and the shape allow, or GEMMs (im2col for R*S > 1). kAuto takes the direct kernels where they
// measured faster: spatial kernels (R*S > 1) with at most 128 channels in and out (64 at stride 2),
// not for the weight gradient of 2-15 input channels, and 1x1 convs' weight gradients up to 32
// input channels; kDirect takes them wherever they fit; kGemm
// never. Passes the direct kernels cannot run use GEMMs in every mode.
enum class ConvAlgorithm { kAuto, kGemm, kDirect };

struct ConvOptions {
  ConvThreading threading = ConvThreading::kAuto;  // of the GEMM path
  ConvAlgorithm algorithm = ConvAlgorithm::kAuto;
  size_t column_budget_floats = 0;  // column region (tiles, partials), all threads; 0: 32 MiB
  // Backward-data only: d_in += the input gradient instead of d_in = (a residual block's input
  // gradient is the shortcut's plus the path's: one pass instead of two).
  bool accumulate_d_in = false;
  // kBf16: every pass runs on the bf16 GEMM (operands rounded to bf16 while packing, fp32 sums and
  // fp32 results; the direct kernels are fp32-only and not used); needs AVX512_BF16 (throws
  // OptionError naming it otherwise). Activations, gradients and weights stay fp32 in memory.
  kernels::Precision precision = kernels::Precision::kFp32;
  // kBf16 only: the tiles that compute the bf16 GEMM's products (kernels/bf16.hpp): vdpbf16ps, or
  // AMX (needs kernels::bf16_amx_available(); the GEMM throws OptionError otherwise). The
  // operands, their packing and the passes' structure are the same.
  kernels::Bf16Engine bf16_engine = kernels::Bf16Engine::kVdpbf16ps;
  // kFp32, backward-weights only: the weight gradient's GEMM on nostrum's own AVX-512F kernel
  // (kernels/fp32_gemm.hpp; needs AVX512F, throws OptionError otherwise) instead of OpenBLAS's
  // SGEMM. The operands and the passes' structure are the same.
  bool nostrum_fp32_gemm = false;
  // Backward passes in kBf16 only: the output gradient already in bf16 (N,P,Q,K), read instead of
  // d_out (which may then be null). The values the GEMM would have rounded d_out to, so the same
  // results bit for bit (the model hands it over from the batch norm after the conv).
  const uint16_t* d_out_bf16 = nullptr;
  // Forward and backward-weights in kBf16 only: the input activations already in bf16 (N,H,W,C),
  // read instead of in (which may then be null); the values the GEMM would have rounded in to, so
  // the same results bit for bit (the model hands them over from the batch norm before the conv).
  const uint16_t* in_bf16 = nullptr;
  // Backward-weights with kPerThread threading, in kBf16 or on nostrum's fp32 GEMM
  // (nostrum_fp32_gemm), where the weight gradient has fewer rows than columns (K < R*S*C),
  // elsewhere no effect: each thread computes its partial of d_weight^T = columns^T x d_out (the
  // input's columns, R*S*C of them, as the GEMM's rows, the output gradient its B operand), and the
  // partials are transposed as they are summed. The same products summed in the same order, so the
  // same bits; on ResNet-50's channel-reducing 1x1 convs at 56x56 and 28x28 and (bf16) its first
  // stride-2 3x3 10-40 % faster, on the deeper ones slower (src/kernels/conv_candidates.md): the
  // candidates gemm_bf16_per_thread_in_rows and gemm_fp32_avx512_per_thread_in_rows, chosen by
  // measurement.
  bool weight_gradient_input_rows = false;
};

// Whether ConvOptions::weight_gradient_input_rows changes how this geometry's weight gradient runs
// (K < R*S*C): where it does not, it is the plain per-thread GEMM.
bool conv2d_weight_gradient_input_rows_fits(const ConvGeometry& g);

size_t conv2d_scratch_floats(const ConvGeometry& g, const ConvOptions& options);
void conv2d_forward(float* out, const float* in, const float* weight, const ConvGeometry& g,
                    float* scratch, const ConvOptions& options);
void conv2d_backward(float* d_in, float* d_weight, const float* d_out, const float* in,
                     const float* weight, const ConvGeometry& g, float* scratch,
                     const ConvOptions& options);

// The two halves of conv2d_backward, for profiling and for layers whose weights are frozen:
// d_in (N,H,W,C) OVERWRITTEN (or accumulated into, see ConvOptions) from d_out (N,P,Q,K) and
// weight (K,C,R,S);
void conv2d_backward_data(float* d_in, const float* d_out, const float* weight,
                          const ConvGeometry& g, float* scratch, const ConvOptions& options);
// d_weight (K,C,R,S) OVERWRITTEN from d_out (N,P,Q,K) and in (N,H,W,C).
void conv2d_backward_weights(float* d_weight, const float* d_out, const float* in,
                             const ConvGeometry& g, float* scratch, const ConvOptions& options);

// ---- today's fixed rule, for the kernel registry (kernels/conv_candidate.hpp) ----
// Whether ConvAlgorithm::kAuto runs this pass on the direct kernels.
bool conv2d_fixed_rule_direct(const ConvGeometry& g, kernels::ConvPass pass,
                              kernels::Precision precision);
// Whether ConvThreading::kPerThread really runs per-thread tiles for this pass at `threads`
// threads (otherwise the GEMM path falls back to one shared GEMM per tile).
bool conv2d_runs_per_thread(const ConvGeometry& g, kernels::ConvPass pass, int threads,
                            const ConvOptions& options);

}  // namespace nostrum::layers
