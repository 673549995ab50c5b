// BatchNorm2d on NHWC activations viewed as (rows = N*H*W, C), PyTorch semantics: batch statistics
// in training (biased variance to normalise, unbiased for the running estimate), running ones in
// eval. Optionally fused with a following ReLU. Statistics are two-pass, in double (float partials
// of 16 rows), from a fixed number of row chunks combined in a fixed order, so results do not
// depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nostrum/core/reducer.hpp"
#include "nostrum/kernels/d_in_finisher.hpp"

namespace nostrum::layers {

struct BatchNormOptions {
  float momentum = 0.1f;
  float eps = 1e-5f;
  bool fuse_relu = false;  // out = max(0, bn(in))
  // Forward only: out = bn(in) + residual (rows, C), before the ReLU when fuse_relu: a residual
  // block's last BN, shortcut add and ReLU in one pass, bit-identical to the unfused chain.
  // Backward is unchanged (the add + ReLU gradient is formed before it).
  const float* residual = nullptr;
  // Forward only: the residual in bf16 (kernels/bf16.hpp), in residual's place (then null): the
  // previous block's output where it was kept so (a bf16 run's residual stream), widened exactly.
  const uint16_t* residual_bf16 = nullptr;
  // Backward only: d_in written here as bf16 (kernels/bf16.hpp's rounding) instead of to d_in
  // (then unused): the output gradient of a conv whose kernels take it in bf16. Must not overlap
  // d_out.
  uint16_t* d_in_bf16 = nullptr;
  // Forward: out written here as bf16 (the same rounding) instead of to out (then unused): the
  // input of a conv whose kernels take it in bf16. Backward: that forward's bf16 output, read for
  // the ReLU mask instead of out (a value below bf16's smallest subnormal rounds to 0 and masks
  // its gradient, as the bf16 conv input it became does).
  uint16_t* out_bf16 = nullptr;
  // Forward and backward: the input in bf16 (kernels/bf16.hpp) in in's place (then unused): a conv
  // output kept in bf16, widened in the register as it is read (the same bits as an fp32 input
  // holding the widened values).
  const uint16_t* in_bf16 = nullptr;
  // Backward only: the first pass's per-chunk sums of this d_out, in, mean, rows and C, as
  // add_relu_backward_with_norm_sums wrote them (batch_norm_backward_sums_doubles(C)): that pass
  // is skipped, the same bits.
  const double* first_pass_sums = nullptr;
  Reducer* reducer = nullptr;  // sync-BN: sums statistics over a group; nullptr = this rank only
};

// Doubles of scratch batch_norm_forward_training / batch_norm_backward need for C channels.
size_t batch_norm_scratch_doubles(int C);
// Doubles of BatchNormOptions::first_pass_sums for C channels.
size_t batch_norm_backward_sums_doubles(int C);

// Training forward. out (rows,C); save_mean, save_invstd (C) are kept for backward; running_mean,
// running_var (C) are updated with the momentum; in (rows,C); gamma, beta (C); scratch as above.
// Throws ShapeError when the (global) row count is < 2.
void batch_norm_forward_training(float* out, float* save_mean, float* save_invstd,
                                 float* running_mean, float* running_var, const float* in,
                                 const float* gamma, const float* beta, int64_t rows, int C,
                                 const BatchNormOptions& options, double* scratch);

// Eval forward with the running statistics: out (rows,C) from in (rows,C), not overlapping;
// scratch (C) receives 1/sqrt(running_var + eps) (no allocation per call).
void batch_norm_forward_inference(float* out, const float* in, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, int64_t rows, int C,
                                  const BatchNormOptions& options, float* scratch);

// Backward of the training forward. d_in (rows,C) is overwritten and may alias d_out (rows,C);
// d_gamma, d_beta (C) are OVERWRITTEN with this rank's gradients (the gradient allreduce sums
// them); in (rows,C) is the forward input; out (rows,C) the forward output, read only when
// fuse_relu. With a reducer, the two per-channel sums that d_in needs are summed over the group.
void batch_norm_backward(float* d_in, float* d_gamma, float* d_beta, const float* d_out,
                         const float* in, const float* out, const float* gamma,
                         const float* save_mean, const float* save_invstd, int64_t rows, int C,
                         const BatchNormOptions& options, double* scratch);

// A batch norm's input, batch mean and where its first backward pass's sums go: one of the norms
// that read the gradient add_relu_backward_with_norm_sums masks.
struct NormSumsRequest {
  const float* in = nullptr;          // (rows, C) the norm's forward input, or
  const uint16_t* in_bf16 = nullptr;  // that input kept in bf16 (then in is unused)
  const float* save_mean = nullptr;   // (C) its batch mean from the forward
  double* sums = nullptr;             // batch_norm_backward_sums_doubles(C), written
};

// The backward of a residual block's add + ReLU fused with the first backward pass of the batch
// norms that read its gradient (the path's last one and a downsample's): d_sum (rows, C) = d_sum
// where the block output out (fp32, or out_bf16 in its place) is > 0, in place, exactly as
// layers::add_relu_backward, and for each of norm_count (1 or 2) norms its sums of that masked
// gradient, in its first_pass_sums layout: batch_norm_backward with them gives the bits it gives
// without. One pass over the gradient instead of three.
void add_relu_backward_with_norm_sums(float* d_sum, const float* out, const uint16_t* out_bf16,
                                      int64_t rows, int C, const NormSumsRequest* norms,
                                      int norm_count);

// add_relu_backward_with_norm_sums over rows as they become final: the next block's first conv
// adds its data gradient onto d_sum last, and a kernel that adds through a partial hands each
// partial here (kernels::DInFinisher), so that add, the mask and the sums are one pass over rows
// still in cache. Calls over [0, rows) in order, in any pieces, with or without partials, give the
// bits of adding every partial first and then one add_relu_backward_with_norm_sums call: a row
// chunk's sums take whole 16-row blocks in order, so rows of a block that a call ends inside are
// masked then and summed by the next call. A call that covers fewer row chunks than there are
// threads splits the channels too.
class AddReluBackward final : public kernels::DInFinisher {
 public:
  // The arguments of add_relu_backward_with_norm_sums (kept by pointer: they must outlive it);
  // norm_count 0 (a block without such norms): the add and the mask alone.
  AddReluBackward(float* d_sum, const float* out, const uint16_t* out_bf16, int64_t rows, int C,
                  const NormSumsRequest* norms, int norm_count);
  void finish(const float* add, int64_t r0, int64_t r1) override;
  int64_t rows() const override { return rows_; }

 private:
  float* d_sum_;
  const float* out_;
  const uint16_t* out_bf16_;
  int64_t rows_;
  int C_;
  const NormSumsRequest* norms_;
  int norm_count_;
  int64_t done_ = 0;  // rows finished so far
};

}  // namespace nostrum::layers
