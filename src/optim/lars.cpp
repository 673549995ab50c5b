// Lars: MLPerf's ResNet LARS (TensorFlow LARSOptimizer). Three phases in one parallel region:
// block partial norms (double), per-tensor trust ratios (one thread, block order), the update.
#include "nostrum/optim/lars.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "nostrum/core/error.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::optim {

Lars::Lars(const ParameterTable& table, LarsOptions options) : options_(options) {
  check_momentum_and_decay(options.momentum, options.weight_decay);
  NOSTRUM_CHECK(options.eta > 0.0f, OptionError,
                "LARS trust coefficient must be > 0, got " + std::to_string(options.eta),
                "--lars-eta");
  NOSTRUM_CHECK(options.epsilon >= 0.0f, OptionError,
                "LARS epsilon must be >= 0, got " + std::to_string(options.epsilon),
                "LarsOptions::epsilon");
  size_t state_floats = 0;
  for (const Parameter& p : table)
    if (p.trainable()) state_floats += Arena::padded(static_cast<size_t>(p.numel()));
  state_ = Arena(state_floats, "lars momentum");
  for (const Parameter& p : table) {
    if (!p.trainable()) continue;
    NOSTRUM_CHECK(p.value != nullptr && p.grad != nullptr, ShapeError,
                  "trainable parameter without value or gradient storage", p.name);
    Slot slot{p.value,
              p.grad,
              state_.take(static_cast<size_t>(p.numel()), p.name),
              p.numel(),
              !p.is_bias_or_norm(),
              static_cast<int64_t>(blocks_.size()),
              0};
    if (slot.adaptive) {
      const int s = static_cast<int>(slots_.size());
      for (int64_t begin = 0; begin < slot.numel; begin += kBlock)
        blocks_.push_back({s, begin, std::min(slot.numel, begin + kBlock)});
      slot.num_blocks = static_cast<int64_t>(blocks_.size()) - slot.first_block;
    }
    slots_.push_back(slot);
  }
  partial_w2_.assign(blocks_.size(), 0.0);
  partial_g2_.assign(blocks_.size(), 0.0);
  trust_.assign(slots_.size(), 1.0);
  scaled_lr_.assign(slots_.size(), 0.0f);
}

void Lars::step(float lr) {
  const float momentum = options_.momentum;
  const float wd = options_.weight_decay;
  const bool nesterov = options_.nesterov;
  const int64_t num_blocks = static_cast<int64_t>(blocks_.size());
  const int num_slots = static_cast<int>(slots_.size());
#pragma omp parallel
  {
    // 1. Sums of squares per fixed block, in double.
#pragma omp for schedule(static)
    for (int64_t b = 0; b < num_blocks; ++b) {
      const Block block = blocks_[b];
      const float* w = slots_[block.slot].value;
      const float* g = slots_[block.slot].grad;
      // 8 independent accumulators (fixed lanes: deterministic) let the compiler vectorise.
      double w_lane[8] = {0, 0, 0, 0, 0, 0, 0, 0}, g_lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t i = block.begin;
      for (; i + 8 <= block.end; i += 8)
        for (int j = 0; j < 8; ++j) {
          w_lane[j] += static_cast<double>(w[i + j]) * w[i + j];
          g_lane[j] += static_cast<double>(g[i + j]) * g[i + j];
        }
      for (int j = 0; i < block.end; ++i, ++j) {
        w_lane[j] += static_cast<double>(w[i]) * w[i];
        g_lane[j] += static_cast<double>(g[i]) * g[i];
      }
      double w2 = 0.0, g2 = 0.0;
      for (int j = 0; j < 8; ++j) {
        w2 += w_lane[j];
        g2 += g_lane[j];
      }
      partial_w2_[b] = w2;
      partial_g2_[b] = g2;
    }  // implicit barrier
       // 2. Trust ratios: one thread sums the blocks in order (deterministic for any thread count).
#pragma omp single
    for (int s = 0; s < num_slots; ++s) {
      const Slot& slot = slots_[s];
      double trust = 1.0;
      if (slot.adaptive) {
        double w2 = 0.0, g2 = 0.0;
        for (int64_t b = slot.first_block; b < slot.first_block + slot.num_blocks; ++b) {
          w2 += partial_w2_[b];
          g2 += partial_g2_[b];
        }
        const double w_norm = std::sqrt(w2), g_norm = std::sqrt(g2);
        if (w_norm > 0.0 && g_norm > 0.0)
          trust =
              options_.eta * w_norm /
              (g_norm + static_cast<double>(wd) * w_norm + static_cast<double>(options_.epsilon));
      }
      trust_[s] = trust;
      scaled_lr_[s] = static_cast<float>(static_cast<double>(lr) * trust);
    }  // implicit barrier
    // 3. The update, one static loop per tensor, no barrier between tensors.
    for (int s = 0; s < num_slots; ++s) {
      const Slot slot = slots_[s];
      float* w = slot.value;
      const float* grad = slot.grad;
      float* m = slot.momentum;
      const float scaled_lr = scaled_lr_[s];
      const float decay = slot.adaptive ? wd : 0.0f;
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < slot.numel; ++i) {
        const float g = grad[i] + decay * w[i];
        const float step = scaled_lr * g;
        const float buf = momentum * m[i] + step;
        m[i] = buf;
        w[i] = nesterov ? w[i] - (momentum * buf + step) : w[i] - buf;
      }
    }
  }
  ++steps_taken_;
}

}  // namespace nostrum::optim
