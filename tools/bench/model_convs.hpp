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

}  // namespace nostrum::bench
