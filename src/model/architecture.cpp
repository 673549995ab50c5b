// The name -> ResNet architecture table and config validation.
#include "nostrum/model/architecture.hpp"

#include "nostrum/core/error.hpp"

namespace nostrum::model {

namespace {

struct Entry {
  const char* name;
  bool bottleneck;
  bool imagenet_stem;
  std::vector<int> blocks;
  int default_width;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {"resnet18", false, true, {2, 2, 2, 2}, 64},
      {"resnet34", false, true, {3, 4, 6, 3}, 64},
      {"resnet50", true, true, {3, 4, 6, 3}, 64},
      {"resnet101", true, true, {3, 4, 23, 3}, 64},
      {"resnet152", true, true, {3, 8, 36, 3}, 64},
      // CIFAR-style 6n+2: n basic blocks per stage
      {"resnet8", false, false, {1, 1, 1}, 16},
      {"resnet14", false, false, {2, 2, 2}, 16},
      {"resnet20", false, false, {3, 3, 3}, 16},
      {"resnet32", false, false, {5, 5, 5}, 16},
      {"resnet44", false, false, {7, 7, 7}, 16},
      {"resnet56", false, false, {9, 9, 9}, 16},
      {"resnet110", false, false, {18, 18, 18}, 16},
  };
  return entries;
}

std::string joined_names() {
  std::string s;
  for (const auto& e : table()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : table()) names.emplace_back(e.name);
  return names;
}

ResNetSpec resnet_spec(const ModelConfig& config) {
  for (const auto& e : table()) {
    if (config.name != e.name) continue;
    NOSTRUM_CHECK(config.num_classes > 0, OptionError,
                  "number of classes must be positive, got " + std::to_string(config.num_classes),
                  "model " + config.name);
    NOSTRUM_CHECK(config.in_channels > 0, OptionError,
                  "input channels must be positive, got " + std::to_string(config.in_channels),
                  "model " + config.name);
    NOSTRUM_CHECK(config.width >= 0, OptionError,
                  "width must be positive (0 = default), got " + std::to_string(config.width),
                  "model " + config.name);
    ResNetSpec spec;
    spec.name = e.name;
    spec.bottleneck = e.bottleneck;
    spec.imagenet_stem = e.imagenet_stem;
    spec.blocks = e.blocks;
    spec.base_width = config.width > 0 ? config.width : e.default_width;
    spec.num_classes = config.num_classes;
    spec.in_channels = config.in_channels;
    spec.zero_init_residual = config.zero_init_residual;
    spec.precision = config.precision;
    return spec;
  }
  throw OptionError("unknown model '" + config.name + "'", "option --model",
                    "valid models: " + joined_names());
}

}  // namespace nostrum::model
