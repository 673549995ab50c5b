// Weights files: nostrum -> HDF5 -> nostrum bit-identical, and clear errors for a missing file, a
// non-HDF5 file, a missing key, an extra key and a wrong shape.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "h5_read.hpp"
#include "io/weights_file.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/model/model.hpp"

using namespace nostrum;
using nostrum::testing::temp_path;

namespace {
std::unique_ptr<model::Model> make(const std::string& name, int classes, int width, uint64_t seed) {
  model::ModelConfig c;
  c.name = name;
  c.num_classes = classes;
  c.in_channels = 1;
  c.width = width;
  auto m = model::Model::create(c);
  m->build(1, 8, 8);
  m->init(seed);
  return m;
}
}  // namespace

TEST_CASE("weights survive a save and load bit for bit", "[engine][weights]") {
  auto a = make("resnet8", 10, 8, 1);
  auto b = make("resnet8", 10, 8, 2);
  a->parameter("bn1.running_var").value[2] = 0.3f;
  a->parameter("layer2.0.bn1.num_batches_tracked").value[0] = 77.0f;
  const std::string path = temp_path("weights_roundtrip.h5");
  io::save_weights(path, a->parameters(), "resnet8");
  io::load_weights(path, b->parameters());
  CHECK(std::memcmp(a->parameter_data(), b->parameter_data(), a->parameter_count() * 4) == 0);
  CHECK(std::memcmp(a->buffer_data(), b->buffer_data(), a->buffer_count() * 4) == 0);
  const auto conv = nostrum::testing::read_dataset<float>(path, "/model/layer1.0.conv2.weight");
  CHECK(conv.size() == 8 * 8 * 9);
}

TEST_CASE("loading weights names what is wrong", "[engine][weights]") {
  auto m = make("resnet8", 10, 8, 1);
  CHECK_THROWS_AS(io::load_weights(temp_path("no_such_file.h5"), m->parameters()), IoError);
  const std::string text = temp_path("not_hdf5.h5");
  std::ofstream(text) << "hello";
  CHECK_THROWS_WITH(io::load_weights(text, m->parameters()),
                    Catch::Contains("not an HDF5 file") && Catch::Contains("not_hdf5.h5"));
  // another width: every shape differs
  auto wide = make("resnet8", 10, 16, 1);
  const std::string wide_path = temp_path("wide.h5");
  io::save_weights(wide_path, wide->parameters(), "resnet8");
  CHECK_THROWS_AS(io::load_weights(wide_path, m->parameters()), ShapeError);
  CHECK_THROWS_WITH(io::load_weights(wide_path, m->parameters()),
                    Catch::Contains("conv1.weight") && Catch::Contains("(16, 1, 3, 3)") &&
                        Catch::Contains("(8, 1, 3, 3)"));
  // another depth: resnet14 has keys resnet8 lacks, and the other way round
  auto deep = make("resnet14", 10, 8, 1);
  const std::string deep_path = temp_path("deep.h5");
  io::save_weights(deep_path, deep->parameters(), "resnet14");
  CHECK_THROWS_AS(io::load_weights(deep_path, m->parameters()), DataError);
  CHECK_THROWS_WITH(io::load_weights(deep_path, m->parameters()), Catch::Contains("layer1.1."));
  const std::string small_path = temp_path("small.h5");
  io::save_weights(small_path, m->parameters(), "resnet8");
  CHECK_THROWS_WITH(io::load_weights(small_path, deep->parameters()),
                    Catch::Contains("lacks key 'layer1.1."));
}
