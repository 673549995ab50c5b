// Optimizer names (one table) and the option checks shared by the optimizers.
#include "nostrum/optim/optimizer.hpp"

#include <string>

#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::optim {

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "lars"};  // OptimizerKind order
  return names;
}

const char* to_string(OptimizerKind kind) {
  return optimizer_names()[static_cast<size_t>(kind)].c_str();
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  return parse_enum_name<OptimizerKind>(name, optimizer_names(), "--optimizer");
}

void check_momentum_and_decay(float momentum, float weight_decay) {
  NOSTRUM_CHECK(momentum >= 0.0f, OptionError,
                "momentum must be >= 0, got " + std::to_string(momentum), "--momentum");
  NOSTRUM_CHECK(weight_decay >= 0.0f, OptionError,
                "weight decay must be >= 0, got " + std::to_string(weight_decay), "--weight-decay");
}

}  // namespace nostrum::optim
