// ResNet-50 v1.5's conv shapes: stem, then per stage the bottleneck 1x1 -> 3x3 (stride in the first
// block) -> 1x1, plus the strided 1x1 downsample of each stage's first block. CIFAR-style ResNets:
// stem, then per stage basic blocks 3x3 -> 3x3 (stride and downsample in the first block).
#include "model_convs.hpp"

namespace nostrum::bench {

namespace {

layers::ConvGeometry conv(int batch, int side, int C, int K, int R, int stride) {
  layers::ConvGeometry g;
  g.N = batch, g.H = side, g.W = side, g.C = C, g.K = K, g.R = R, g.S = R, g.stride = stride;
  g.pad = R / 2;
  return g;
}

std::string label(const std::string& where, int R, int stride, int C, int K, int side) {
  return where + " " + std::to_string(R) + "x" + std::to_string(R) + "/" + std::to_string(stride) +
         " " + std::to_string(C) + "->" + std::to_string(K) + " @" + std::to_string(side);
}

}  // namespace

std::vector<NamedConv> resnet50_convs(int image, int batch) {
  std::vector<NamedConv> convs;
  auto add = [&](const std::string& where, int side, int C, int K, int R, int stride, int count) {
    convs.push_back(
        {label(where, R, stride, C, K, side), conv(batch, side, C, K, R, stride), count});
  };
  add("conv1", image, 3, 64, 7, 2, 1);
  int side = (image + 2 * 3 - 7) / 2 + 1;  // stem
  side = (side + 2 - 3) / 2 + 1;           // max-pool 3x3/2 pad 1
  const int widths[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
  int in_channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int w = widths[stage], out = 4 * w, stride = stage == 0 ? 1 : 2;
    const int out_side = (side - 1) / stride + 1;
    const std::string layer = "layer" + std::to_string(stage + 1);
    add(layer + ".0.conv1", side, in_channels, w, 1, 1, 1);
    add(layer + ".0.conv2", side, w, w, 3, stride, 1);
    add(layer + ".0.conv3", out_side, w, out, 1, 1, 1);
    add(layer + ".0.downsample", side, in_channels, out, 1, stride, 1);
    if (blocks[stage] > 1) {
      const int rest = blocks[stage] - 1;
      add(layer + ".k.conv1", out_side, out, w, 1, 1, rest);
      add(layer + ".k.conv2", out_side, w, w, 3, 1, rest);
      add(layer + ".k.conv3", out_side, w, out, 1, 1, rest);
    }
    in_channels = out;
    side = out_side;
  }
  return convs;
}

std::vector<NamedConv> cifar_resnet_convs(int image, int in_channels, int width, int blocks,
                                          int batch) {
  std::vector<NamedConv> convs;
  auto add = [&](const std::string& where, int side, int C, int K, int R, int stride, int count) {
    convs.push_back(
        {label(where, R, stride, C, K, side), conv(batch, side, C, K, R, stride), count});
  };
  add("conv1", image, in_channels, width, 3, 1, 1);
  int side = image, channels = width;
  for (int stage = 0; stage < 3; ++stage) {
    const int w = width << stage, stride = stage == 0 ? 1 : 2;
    const int out_side = (side - 1) / stride + 1;
    const std::string layer = "layer" + std::to_string(stage + 1);
    add(layer + ".0.conv1", side, channels, w, 3, stride, 1);
    add(layer + ".0.conv2", out_side, w, w, 3, 1, 1);
    if (stride != 1 || channels != w) add(layer + ".0.downsample", side, channels, w, 1, stride, 1);
    if (blocks > 1) add(layer + ".k.conv1+2", out_side, w, w, 3, 1, 2 * (blocks - 1));
    channels = w;
    side = out_side;
  }
  return convs;
}

bool is_bench_model(const std::string& model) {
  return model == "resnet50" || model == "resnet8";
}

int bench_model_image(const std::string& model, int image) {
  return image != 0 ? image : model == "resnet50" ? 224 : 28;
}

std::vector<NamedConv> bench_model_convs(const std::string& model, int image, int batch) {
  image = bench_model_image(model, image);
  return model == "resnet50" ? resnet50_convs(image, batch)
                             : cifar_resnet_convs(image, 1, 16, 1, batch);
}

}  // namespace nostrum::bench
