// The distinct convolutions of a model at a given image size, with how often each occurs in one
// forward pass: ResNet-50 v1.5 (torchvision) and the CIFAR-style ResNets (resnet8's basic blocks);
// geometry in nostrum's NHWC terms (batch filled in by the caller).
#pragma once

#include <string>
#include <vector>

#include "nostrum/layers/conv2d.hpp"

namespace nostrum::bench {

struct NamedConv {
  std::string name;  // e.g. "layer2.0.conv2 3x3/2 128->128 @56"
  layers::ConvGeometry geometry;
  int count = 1;  // occurrences in the network
};

// image: input side (224 for ImageNet); batch: N of every geometry.
std::vector<NamedConv> resnet50_convs(int image, int batch);

// CIFAR-style ResNet-(6n+2) with n = blocks per stage: a 3x3 stem to `width` channels, three
// stages of basic blocks (width, 2 width, 4 width; stride 2 and a 1x1 downsample entering stages
// 2 and 3). resnet8: blocks 1, width 16, 28x28x1 for Fashion-MNIST.
std::vector<NamedConv> cifar_resnet_convs(int image, int in_channels, int width, int blocks,
                                          int batch);

// The models the conv benchmarks take by name (--model): "resnet50" (224x224x3 by default) and
// "resnet8" (Fashion-MNIST's 28x28x1 by default: width 16, one basic block a stage).
bool is_bench_model(const std::string& model);
// model's convs at image x image (0: the model's default) and batch; model as is_bench_model
// accepts (any other: resnet8's).
std::vector<NamedConv> bench_model_convs(const std::string& model, int image, int batch);
int bench_model_image(const std::string& model, int image);  // image, or 0: the default

}  // namespace nostrum::bench
