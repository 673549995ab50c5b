// Sgd: torch.optim.SGD's update, one parallel region, one static OpenMP loop per tensor.
#include "nostrum/optim/sgd.hpp"

#include <string>

#include "nostrum/core/error.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::optim {

Sgd::Sgd(const ParameterTable& table, SgdOptions options) : options_(options) {
  check_momentum_and_decay(options.momentum, options.weight_decay);
  NOSTRUM_CHECK(!options.nesterov || (options.momentum > 0.0f && options.dampening == 0.0f),
                OptionError, "Nesterov momentum requires a momentum > 0 and zero dampening",
                "--nesterov", "set --momentum (e.g. 0.9) or drop Nesterov");
  size_t state_floats = 0;
  for (const Parameter& p : table)
    if (p.trainable()) state_floats += Arena::padded(static_cast<size_t>(p.numel()));
  const bool with_buffer = options.momentum != 0.0f;
  state_ = Arena(with_buffer ? state_floats : 0, "sgd momentum");
  for (const Parameter& p : table) {
    if (!p.trainable()) continue;
    NOSTRUM_CHECK(p.value != nullptr && p.grad != nullptr, ShapeError,
                  "trainable parameter without value or gradient storage", p.name);
    const bool exempt = options.exempt_bias_and_norm_from_decay && p.is_bias_or_norm();
    float* buffer = with_buffer ? state_.take(static_cast<size_t>(p.numel()), p.name) : nullptr;
    slots_.push_back({p.value, p.grad, buffer, p.numel(), exempt ? 0.0f : options.weight_decay});
  }
}

void Sgd::step(float lr) {
  const float momentum = options_.momentum;
  const float keep = 1.0f - options_.dampening;
  const bool nesterov = options_.nesterov;
  const bool first = steps_taken_ == 0;
  const int num_slots = static_cast<int>(slots_.size());
#pragma omp parallel
  for (int s = 0; s < num_slots; ++s) {
    const Slot slot = slots_[s];
    float* w = slot.value;
    const float* grad = slot.grad;
    float* buf = slot.momentum;
    const float wd = slot.weight_decay;
    // Independent tensors: no barrier between them (nowait).
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < slot.numel; ++i) {
      float g = grad[i];
      if (wd != 0.0f) g = g + wd * w[i];
      if (buf != nullptr) {
        float b;
        if (first) {
          b = g;
        } else {
          b = momentum * buf[i];
          b = b + keep * g;
        }
        buf[i] = b;
        g = nesterov ? g + momentum * b : b;
      }
      w[i] = w[i] - lr * g;
    }
  }
  ++steps_taken_;
}

}  // namespace nostrum::optim
