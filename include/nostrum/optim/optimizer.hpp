// Optimizer: the interface of the flat-loop optimizers (SGD, LARS). Each works on a ParameterTable
// (value/grad flat in PyTorch layout); its state (one momentum float per trainable parameter
// element) lives in one arena sized from the table at construction; step() never allocates.
#pragma once

#include <cstdint>
#include <string>

#include "nostrum/core/arena.hpp"

namespace nostrum::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every trainable parameter from its gradient, with learning rate `lr` (the value
  // of the schedule at this step). Buffers (running statistics) are never touched.
  virtual void step(float lr) = 0;
  virtual std::string name() const = 0;  // "sgd" or "lars": MLPerf's opt_name

  // Momentum buffers, one float per trainable element, slices in table order (for checkpoints).
  Arena& state() { return state_; }
  const Arena& state() const { return state_; }
  // Steps taken so far (SGD initialises its buffer on the first); restore it with the state.
  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps) { steps_taken_ = steps; }

 protected:
  Arena state_;
  int64_t steps_taken_ = 0;
};

// The checks every optimizer makes on its options: OptionError naming --momentum or --weight-decay
// for a negative value.
void check_momentum_and_decay(float momentum, float weight_decay);

}  // namespace nostrum::optim
