// Sgd: torch.optim.SGD's update rule over a ParameterTable, one OpenMP loop per tensor inside one
// parallel region. value/grad are flat float slices (PyTorch layout); momentum lives in state().
#pragma once

#include <vector>

#include "nostrum/core/parameter.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::optim {

struct SgdOptions {
  float momentum = 0.9f;
  float dampening = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  // MLPerf/common practice: no weight decay on BN gamma/beta and biases (torch applies it to all).
  bool exempt_bias_and_norm_from_decay = false;
};

// Per trainable tensor (PyTorch's order of operations, all in fp32):
//   g = grad + weight_decay * w                 (unless exempt)
//   first step: buf = g; later: buf = momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf      (momentum 0: g unchanged, no buffer)
//   w = w - lr * g
class Sgd final : public Optimizer {
 public:
  // Keeps pointers into `table`'s arenas: the table's value/grad pointers must outlive this.
  // Throws OptionError for negative momentum/decay, or Nesterov without momentum or with dampening.
  Sgd(const ParameterTable& table, SgdOptions options);
  void step(float lr) override;
  OptimizerKind kind() const override { return OptimizerKind::kSgd; }
  const SgdOptions& options() const { return options_; }

 private:
  struct Slot {
    float* value;       // (numel) parameter
    const float* grad;  // (numel) gradient
    float* momentum;    // (numel) buffer in state_
    int64_t numel;
    float weight_decay;  // 0 when exempt
  };
  SgdOptions options_;
  std::vector<Slot> slots_;
};

}  // namespace nostrum::optim
