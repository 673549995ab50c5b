// ResnetHyperparameters: closed-division checks and the opt_name + optimizer key block.
#include "nostrum/log/resnet_hyperparameters.hpp"

#include <cmath>

namespace nostrum::log {

namespace {
bool power_of_two_times(double v, double unit) {
  if (!(v > 0.0) || !std::isfinite(v)) return false;
  const double n = std::log2(v / unit);
  return std::fabs(n - std::round(n)) < 1e-9;
}
bool multiple_of(double v, double unit) {
  return v > 0.0 && std::isfinite(v) && std::fabs(v / unit - std::round(v / unit)) < 1e-6;
}
std::string num(double v) {
  return LogValue(v).json();
}
}  // namespace

std::vector<std::string> closed_division_violations(const ResnetHyperparameters& h) {
  std::vector<std::string> out;
  const bool lars = h.optimizer == optim::OptimizerKind::kLars;
  const std::string p = lars ? "lars_opt_" : "sgd_opt_";
  if (lars && !(h.base_lr > 0.0))
    out.push_back(p + "base_learning_rate must be > 0, got " + num(h.base_lr));
  if (!lars && !multiple_of(h.base_lr, 0.001))
    out.push_back(p + "base_learning_rate must be a positive multiple of 0.001, got " +
                  num(h.base_lr));
  if (h.end_lr != 0.0001)
    out.push_back(p + "end_learning_rate must be 0.0001, got " + num(h.end_lr));
  if (lars && h.poly_power != 2.0)
    out.push_back(p + "learning_rate_decay_poly_power must be 2, got " + num(h.poly_power));
  if (!lars && !(h.poly_power > 0.0))
    out.push_back(p + "learning_rate_decay_poly_power must be > 0, got " + num(h.poly_power));
  if (h.decay_steps <= 0)
    out.push_back(p + "learning_rate_decay_steps must be > 0, got " +
                  std::to_string(h.decay_steps));
  if (lars && !(h.warmup_epochs > 0.0))
    out.push_back("lars_opt_learning_rate_warmup_epochs must be > 0, got " + num(h.warmup_epochs));
  if (!lars && !(h.warmup_epochs >= 0.0))
    out.push_back("opt_learning_rate_warmup_epochs must be >= 0, got " + num(h.warmup_epochs));
  if (!(h.momentum > 0.0)) out.push_back(p + "momentum must be > 0, got " + num(h.momentum));
  if (!power_of_two_times(h.weight_decay, 0.0001))
    out.push_back(p + "weight_decay must be 0.0001 * 2^N, got " + num(h.weight_decay));
  if (lars && h.epsilon != 0.0) out.push_back("lars_epsilon must be 0, got " + num(h.epsilon));
  if (!lars && h.bn_span <= 0)
    out.push_back("model_bn_span must be > 0, got " + std::to_string(h.bn_span));
  return out;
}

void log_hyperparameters(MlLogger& log, SourceLocation where, const ResnetHyperparameters& h) {
  log.event(where, keys::kOptName, optim::to_string(h.optimizer));
  if (h.optimizer == optim::OptimizerKind::kLars) {
    log.event(where, keys::kLarsOptBaseLearningRate, h.base_lr);
    log.event(where, keys::kLarsOptEndLearningRate, h.end_lr);
    log.event(where, keys::kLarsOptLearningRateDecayPolyPower, h.poly_power);
    log.event(where, keys::kLarsOptLearningRateDecaySteps, h.decay_steps);
    log.event(where, keys::kLarsEpsilon, h.epsilon);
    log.event(where, keys::kLarsOptLearningRateWarmupEpochs, h.warmup_epochs);
    log.event(where, keys::kLarsOptMomentum, h.momentum);
    log.event(where, keys::kLarsOptWeightDecay, h.weight_decay);
  } else {
    log.event(where, keys::kSgdOptBaseLearningRate, h.base_lr);
    log.event(where, keys::kSgdOptEndLearningRate, h.end_lr);
    log.event(where, keys::kSgdOptLearningRateDecayPolyPower, h.poly_power);
    log.event(where, keys::kSgdOptLearningRateDecaySteps, h.decay_steps);
    log.event(where, keys::kSgdOptWeightDecay, h.weight_decay);
    log.event(where, keys::kSgdOptMomentum, h.momentum);
    log.event(where, keys::kOptLearningRateWarmupEpochs, h.warmup_epochs);
    log.event(where, keys::kModelBnSpan, h.bn_span);
  }
}

}  // namespace nostrum::log
