// ResNet architectures by name: torchvision's ImageNet ResNets (v1.5 bottleneck) and the
// CIFAR-style 6n+2 ResNets of He et al. (3x3 stem, no max-pool, three stages of widths w, 2w, 4w).
#pragma once

#include <string>
#include <vector>

#include "nostrum/kernels/precision.hpp"

namespace nostrum::model {

// What a user picks: the model name and the few knobs that change its shape or init.
struct ModelConfig {
  std::string name = "resnet50";
  int num_classes = 1000;
  int in_channels = 3;
  int width = 0;  // stage-1 width; 0 = the model's default (64 ImageNet, 16 CIFAR)
  bool zero_init_residual = false;  // last BN gamma of every block starts at 0 (torchvision option)
  kernels::Precision precision = kernels::Precision::kFp32;  // of the convs and the classifier
};

struct ResNetSpec {
  std::string name;
  bool bottleneck = false;    // 1x1-3x3-1x1 blocks with expansion 4 (stride in the 3x3: v1.5)
  bool imagenet_stem = true;  // 7x7/2 conv + 3x3/2 max-pool; else 3x3/1 conv, no pool
  std::vector<int> blocks;    // blocks per stage; stage i has width base_width * 2^i
  int base_width = 64;
  int num_classes = 1000;
  int in_channels = 3;
  bool zero_init_residual = false;
  kernels::Precision precision = kernels::Precision::kFp32;
};

// The spec for a config; throws OptionError listing model_names() for an unknown name, and for
// non-positive classes, channels or width.
ResNetSpec resnet_spec(const ModelConfig& config);

// Every valid model name: resnet18 resnet34 resnet50 resnet101 resnet152 resnet8 resnet14 resnet20
// resnet32 resnet44 resnet56 resnet110.
std::vector<std::string> model_names();

}  // namespace nostrum::model
