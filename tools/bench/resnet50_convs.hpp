// The distinct convolutions of ResNet-50 v1.5 (torchvision) at a given image size, with how often
// each occurs in one forward pass; geometry in nostrum's NHWC terms (batch filled in by the caller).
#pragma once

#include <string>
#include <vector>

#include "nostrum/layers/conv2d.hpp"

namespace nostrum::bench {

struct NamedConv {
  std::string name;  // e.g. "layer2.0.conv2 3x3/2 128->128 @56"
  layers::ConvGeometry geometry;
  int count = 1;     // occurrences in the network
};

// image: input side (224 for ImageNet); batch: N of every geometry.
std::vector<NamedConv> resnet50_convs(int image, int batch);

}  // namespace nostrum::bench
