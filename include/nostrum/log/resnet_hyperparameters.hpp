// ResnetHyperparameters: the optimizer recipe of a ResNet run as MLPerf logs it (opt_name and the
// sgd_opt_* / lars_opt_* keys), the closed-division constraints on it (checked before training
// starts, so a run is not wasted on a log that cannot pass), and the one call that logs the whole
// block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nostrum/log/mllog.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::log {

struct ResnetHyperparameters {
  optim::OptimizerKind optimizer = optim::OptimizerKind::kLars;
  double base_lr = 0.0;    // peak learning rate after warm-up
  double end_lr = 0.0001;  // polynomial decay end
  double poly_power = 2.0;
  int64_t decay_steps = 0;  // steps of the polynomial decay
  double warmup_epochs = 0.0;
  double momentum = 0.9;
  double weight_decay = 0.0001;
  double epsilon = 0.0;  // LARS only
  int64_t bn_span = 0;   // SGD only (model_bn_span): samples per BN statistics group
};

// Every rule of the closed division (training_3.1.0 closed_resnet_{sgd,lars}.yaml as checked by
// tools/mlperf/check_log.py) the recipe breaks, one readable line each; empty when it complies.
std::vector<std::string> closed_division_violations(const ResnetHyperparameters& h);

// Logs opt_name and that optimizer's keys (POINT_IN_TIME events, before init_stop).
void log_hyperparameters(MlLogger& logger, SourceLocation where, const ResnetHyperparameters& h);

}  // namespace nostrum::log
