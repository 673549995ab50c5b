// Parameter: one entry of a model's parameter table, the one list that sizes and names every
// trainable tensor and buffer. value and grad point into the parameter and gradient arenas (same
// layout, same offsets), contiguous and in PyTorch's layout and shape (OIHW for conv), so weights
// files, checkpoints, the optimizer loop and the gradient allreduce all work on flat slices.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nostrum/core/tensor.hpp"

namespace nostrum {

enum class ParameterKind {
  kWeight,     // conv / linear weight: weight decay and LARS trust ratio apply
  kBias,       // linear/conv bias: exempt from decay and LARS when the optimizer is asked to
  kNormScale,  // batch-norm gamma: exempt likewise
  kNormShift,  // batch-norm beta: exempt likewise
  kBuffer,     // running statistics: not trained, not reduced, saved in weights files
};

struct Parameter {
  std::string name;  // torchvision state_dict key, e.g. "layer1.0.conv1.weight"
  Shape shape;       // PyTorch's shape
  ParameterKind kind = ParameterKind::kWeight;
  float* value = nullptr;  // numel() floats in the parameter (or buffer) arena
  float* grad = nullptr;   // numel() floats in the gradient arena; nullptr for buffers
  size_t offset = 0;       // offset of value in its arena == offset of grad in the gradient arena
  int64_t numel() const { return shape.numel(); }
  bool trainable() const { return kind != ParameterKind::kBuffer; }
  // BN parameters and biases: the set MLPerf exempts from weight decay and the LARS trust ratio.
  bool is_bias_or_norm() const {
    return kind == ParameterKind::kBias || kind == ParameterKind::kNormScale ||
           kind == ParameterKind::kNormShift;
  }
};

using ParameterTable = std::vector<Parameter>;

}  // namespace nostrum
