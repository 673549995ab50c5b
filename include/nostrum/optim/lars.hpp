// Lars: layer-wise adaptive rate scaling exactly as MLPerf's ResNet reference uses it (TensorFlow's
// LARSOptimizer with skip_list ["batch_normalization", "bias"]), over a ParameterTable. Per-tensor
// norms are summed in double over fixed blocks, so results do not depend on the thread count.
#pragma once

#include <vector>

#include "nostrum/core/parameter.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::optim {

struct LarsOptions {
  float momentum = 0.9f;
  float weight_decay = 0.0001f;
  float eta = 0.001f;     // trust coefficient ("eeta")
  float epsilon = 0.0f;   // MLPerf closed division: 0
  bool nesterov = false;  // the reference runs without
};

// Per trainable tensor w with gradient g (momentum buffer m starts at 0):
//   weights (not bias/BN): trust = (|w| > 0 && |g| > 0) ? eta |w| / (|g| + wd |w| + eps) : 1
//                          scaled_lr = lr * trust;  g = g + wd * w
//   bias / BN gamma, beta: scaled_lr = lr; g unchanged (no trust ratio, no decay)
//   m = momentum * m + scaled_lr * g
//   w = w - m                    (nesterov: w = w - (momentum * m + scaled_lr * g))
// Note the learning rate sits inside the buffer (TF's ApplyMomentum), unlike torch's SGD.
class Lars final : public Optimizer {
 public:
  // Keeps pointers into `table`'s arenas. Throws OptionError for negative hyperparameters.
  Lars(const ParameterTable& table, LarsOptions options);
  void step(float lr) override;
  OptimizerKind kind() const override { return OptimizerKind::kLars; }
  const LarsOptions& options() const { return options_; }
  // The trust ratio each trainable tensor got in the last step (1 for exempt ones), table order
  // over trainable parameters only; for logging and tests.
  const std::vector<double>& last_trust_ratios() const { return trust_; }

 private:
  static constexpr int64_t kBlock = 8192;  // norm partial sums over fixed blocks: deterministic
  struct Slot {
    float* value;       // (numel) parameter
    const float* grad;  // (numel) gradient
    float* momentum;    // (numel) buffer in state_
    int64_t numel;
    bool adaptive;  // trust ratio and weight decay apply (not bias/BN)
    int64_t first_block;
    int64_t num_blocks;
  };
  struct Block {
    int slot;
    int64_t begin, end;
  };
  LarsOptions options_;
  std::vector<Slot> slots_;
  std::vector<Block> blocks_;       // every adaptive tensor cut into kBlock pieces
  std::vector<double> partial_w2_;  // per block: sum of w^2
  std::vector<double> partial_g2_;  // per block: sum of g^2
  std::vector<double> trust_;       // per slot
  std::vector<float> scaled_lr_;    // per slot, this step
};

}  // namespace nostrum::optim
