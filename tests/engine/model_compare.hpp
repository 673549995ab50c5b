// Shared by the PyTorch comparisons of whole models (fp32 and bf16): the case, the error measure,
// and non-trivial batch-norm parameters: gammas in
// [0.5, 1.5) except the last BN of each residual block, small (0.1..0.3: the regime
// zero-init-residual training lives in; with gammas ~1 a deep ResNet's gradients at batch 2 are so
// ill-conditioned that PyTorch's own fp32 and fp64 gradients differ by up to 8 %), betas in
// [-0.5, 0.5), and optionally running means in [0, 1). A fixed LCG: the same values every run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <omp.h>

#include <utility>
#include <vector>

#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/model/model.hpp"

namespace nostrum::testing {

// A model compared with PyTorch: name, classes, input channels, batch, square input size.
struct ModelCase {
  const char* name;
  int classes, channels, batch, size;
};

// ||a - b|| / ||b|| (L2 over the whole tensor, in double).
inline double relative_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// The conv kernel choices a whole-model comparison runs under: the fixed rule (what build sets),
// the measured choice (no cache), and each registry candidate that runs here in `precision`
// forced (the fixed rule where it does not fit).
inline std::vector<std::string> conv_kernel_modes(kernels::Precision precision) {
  std::vector<std::string> modes = {"fixed", "measure"};
  for (const kernels::ConvCandidate* c : kernels::conv_candidates())
    if (c->available(cpu_features()) && c->supports(precision)) modes.push_back(c->name());
  return modes;
}

// Sets the model's conv kernels by a --conv-kernel value (conv_kernel_modes), without a cache.
inline void use_conv_kernels(model::Model& m, const std::string& mode) {
  const kernels::ConvKernelRequest request =
      kernels::conv_kernel_request(mode, "none", "--conv-kernel");
  m.set_conv_kernels(kernels::select_conv_kernels(m.conv_pass_shapes(), m.spec().precision,
                                                  omp_get_max_threads(), request, nullptr));
}

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
