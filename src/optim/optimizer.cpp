// Option checks shared by the optimizers.
#include "nostrum/optim/optimizer.hpp"

#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::optim {

void check_momentum_and_decay(float momentum, float weight_decay) {
  NOSTRUM_CHECK(momentum >= 0.0f, OptionError, "momentum must be >= 0, got " + std::to_string(momentum),
                "--momentum");
  NOSTRUM_CHECK(weight_decay >= 0.0f, OptionError,
                "weight decay must be >= 0, got " + std::to_string(weight_decay), "--weight-decay");
}

}  // namespace nostrum::optim
