// Non-trivial batch-norm parameters for the PyTorch comparisons of whole models: gammas in
// [0.5, 1.5) except the last BN of each residual block, small (0.1..0.3: the regime
// zero-init-residual training lives in; with gammas ~1 a deep ResNet's gradients at batch 2 are so
// ill-conditioned that PyTorch's own fp32 and fp64 gradients differ by up to 8 %), betas in
// [-0.5, 0.5), and optionally running means in [0, 1). A fixed LCG: the same values every run.
#pragma once

#include <cstdint>
#include <string>

#include "nostrum/model/model.hpp"

namespace nostrum::testing {

inline void set_test_bn_parameters(model::Model& m, bool running_means) {
  const std::string last_bn = m.spec().bottleneck ? ".bn3.weight" : ".bn2.weight";
  uint32_t state = 1;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) * (1.0f / 16777216.0f);
  };
  for (auto& p : m.parameters()) {
    const bool last = p.name.rfind("layer", 0) == 0 && p.name.find(last_bn) != std::string::npos;
    if (p.kind == ParameterKind::kNormScale)
      for (int64_t i = 0; i < p.numel(); ++i)
        p.value[i] = last ? 0.1f + 0.2f * next() : 0.5f + next();
    if (p.kind == ParameterKind::kNormShift)
      for (int64_t i = 0; i < p.numel(); ++i) p.value[i] = next() - 0.5f;
    if (running_means && p.name.find("running_mean") != std::string::npos)
      for (int64_t i = 0; i < p.numel(); ++i) p.value[i] = next();
  }
}

}  // namespace nostrum::testing
