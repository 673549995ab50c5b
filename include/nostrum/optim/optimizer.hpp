// Optimizer: the interface of the flat-loop optimizers (SGD, LARS). Each works on a ParameterTable
// (value/grad flat in PyTorch layout); its state (one momentum float per trainable parameter
// element) lives in one arena sized from the table at construction; step() never allocates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"

namespace nostrum::optim {

// The optimizers nostrum has; their names ("sgd", "lars") are MLPerf's opt_name values.
enum class OptimizerKind { kSgd, kLars };

// Parses "sgd" / "lars"; throws OptionError naming --optimizer and the choices.
OptimizerKind parse_optimizer_kind(const std::string& name);
const char* to_string(OptimizerKind kind);
const std::vector<std::string>& optimizer_names();  // every valid name, in enum order

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every trainable parameter from its gradient, with learning rate `lr` (the value
  // of the schedule at this step). Buffers (running statistics) are never touched.
  virtual void step(float lr) = 0;
  virtual OptimizerKind kind() const = 0;
  std::string name() const { return to_string(kind()); }  // MLPerf's opt_name

  // Momentum buffers, one float per trainable element, slices in table order (for checkpoints).
  Arena& state() { return state_; }
  const Arena& state() const { return state_; }
  // Steps taken so far (SGD initialises its buffer on the first).
  int64_t steps_taken() const { return steps_taken_; }
  // Restores the count with the state (a resumed run: SGD must not re-initialise its buffer).
  void set_steps_taken(int64_t steps) { steps_taken_ = steps; }

 protected:
  Arena state_;
  int64_t steps_taken_ = 0;
};

// The checks every optimizer makes on its options: OptionError naming --momentum or --weight-decay
// for a negative value.
void check_momentum_and_decay(float momentum, float weight_decay);

}  // namespace nostrum::optim
