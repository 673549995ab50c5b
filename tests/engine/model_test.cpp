// Model: parameter counts and names as torchvision (and in its state_dict order, asked of PyTorch
// live), the factory's errors, the gradient arena layout and the decreasing gradient-ready
// watermark, eval with a partial batch, determinism, init, and the FLOP counts the model table
// derives (equal to the hand-counted ones of the model before the table).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <set>

#include "grad_check.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/model/model.hpp"
#include "test_paths.hpp"

using namespace nostrum;
using namespace nostrum::model;

namespace {
std::unique_ptr<Model> make(const std::string& name, int classes, int channels, int batch, int hw,
                            bool init = true) {
  ModelConfig c;
  c.name = name;
  c.num_classes = classes;
  c.in_channels = channels;
  auto m = Model::create(c);
  m->build(batch, hw, hw);
  if (init) m->init(7);
  return m;
}
}  // namespace

TEST_CASE("ResNets have torchvision's parameter counts and names", "[engine][model]") {
  // sum(p.numel() for p in torchvision.models.resnetX().parameters())
  CHECK(make("resnet18", 1000, 3, 1, 32, false)->parameter_count() == 11689512);
  CHECK(make("resnet34", 1000, 3, 1, 32, false)->parameter_count() == 21797672);
  auto m = make("resnet50", 1000, 3, 1, 32, false);
  CHECK(m->parameter_count() == 25557032);
  const auto& t = m->parameters();
  CHECK(t.front().name == "conv1.weight");
  CHECK(t.front().shape == Shape{64, 3, 7, 7});
  CHECK(t[1].name == "bn1.weight");
  CHECK(t[5].name == "bn1.num_batches_tracked");
  CHECK(m->parameter("layer1.0.downsample.0.weight").shape == Shape{256, 64, 1, 1});
  CHECK(m->parameter("layer4.2.conv3.weight").shape == Shape{2048, 512, 1, 1});
  CHECK(m->parameter("layer2.0.conv2.weight").shape == Shape{128, 128, 3, 3});
  CHECK(t.back().name == "fc.bias");
  CHECK(t.size() == 320);  // len(torchvision.models.resnet50().state_dict())
  // CIFAR-style (tools/weights/cifar_resnet.py): resnet20 at 10 classes 272,474, resnet8 (1
  // channel) 77,754; state_dict lengths 128 and 56
  auto r20 = make("resnet20", 10, 3, 1, 8, false);
  CHECK(r20->parameter_count() == 272474);
  CHECK(r20->parameters().size() == 128);
  auto r8 = make("resnet8", 10, 1, 2, 28);
  CHECK(r8->parameter("conv1.weight").shape == Shape{16, 1, 3, 3});
  CHECK(r8->parameter("layer3.0.downsample.0.weight").shape == Shape{64, 32, 1, 1});
  CHECK(r8->parameter("fc.weight").shape == Shape{10, 64});
  CHECK(r8->parameter_count() == 77754);
  CHECK(r8->parameters().size() == 56);
}

TEST_CASE("the factory rejects unknown names with the valid ones", "[engine][model]") {
  ModelConfig c;
  c.name = "resnet51";
  CHECK_THROWS_AS(Model::create(c), OptionError);
  CHECK_THROWS_WITH(Model::create(c), Catch::Contains("resnet51") && Catch::Contains("resnet50") &&
                                          Catch::Contains("resnet8"));
  c.name = "resnet8";
  c.num_classes = 0;
  CHECK_THROWS_AS(Model::create(c), OptionError);
  c.num_classes = 10;
  auto m = Model::create(c);
  CHECK_THROWS_AS(m->build(2, 0, 28), ShapeError);
}

TEST_CASE("arenas: trainable parameters contiguous in state_dict order, buffers apart",
          "[engine][model]") {
  auto m = make("resnet8", 10, 1, 2, 16);
  size_t expect = 0;
  for (const auto& p : m->parameters()) {
    if (!p.trainable()) {
      CHECK(p.grad == nullptr);
      CHECK(p.value >= m->buffer_data());
      CHECK(p.value < m->buffer_data() + m->buffer_count());
      continue;
    }
    CHECK(p.offset == expect);
    CHECK(p.value == m->parameter_data() + p.offset);
    CHECK(p.grad == m->gradient_data() + p.offset);
    expect += p.numel();
  }
  CHECK(expect == m->parameter_count());
}

TEST_CASE("backward reports a decreasing gradient-ready watermark down to 0", "[engine][model]") {
  // basic blocks (resnet8) and bottlenecks with the ImageNet stem (resnet50)
  for (const char* name : {"resnet8", "resnet50"}) {
    auto m = make(name, 5, 3, 2, 16);
    auto x = nostrum::testing::random_vector(2 * 16 * 16 * 3, 1);
    std::vector<int32_t> y = {1, 3};
    m->forward(x.data(), 2, true);
    m->loss(y.data(), 0.1f, 0.5f);
    std::vector<size_t> marks;
    // poison the gradient arena: backward must overwrite every entry
    std::fill(m->gradient_data(), m->gradient_data() + m->parameter_count(), NAN);
    m->backward([&](size_t from) { marks.push_back(from); });
    REQUIRE(!marks.empty());
    CHECK(marks.back() == 0);
    for (size_t i = 1; i < marks.size(); ++i) CHECK(marks[i] < marks[i - 1]);
    size_t finite = 0;
    for (size_t i = 0; i < m->parameter_count(); ++i)
      finite += std::isfinite(m->gradient_data()[i]);
    CHECK(finite == m->parameter_count());
  }
}

TEST_CASE("eval accepts a partial batch and training is deterministic", "[engine][model]") {
  auto a = make("resnet8", 10, 1, 4, 12);
  auto b = make("resnet8", 10, 1, 4, 12);
  auto x = nostrum::testing::random_vector(4 * 12 * 12, 3);
  std::vector<int32_t> y = {0, 1, 2, 3};
  for (auto* m : {a.get(), b.get()}) {
    m->forward(x.data(), 4, true);
    m->loss(y.data(), 0.0f, 0.25f);
    m->backward();
  }
  CHECK(std::equal(a->gradient_data(), a->gradient_data() + a->parameter_count(),
                   b->gradient_data()));
  CHECK(a->parameter("bn1.num_batches_tracked").value[0] == 1.0f);
  // eval on 3 images equals the first 3 of an eval on 4 (running statistics: no batch coupling)
  std::vector<float> full(a->forward(x.data(), 4, false), a->forward(x.data(), 4, false) + 40);
  const float* part = a->forward(x.data(), 3, false);
  // (GEMM blocking depends on the batch, so equal up to rounding)
  for (int i = 0; i < 30; ++i) CHECK(part[i] == Approx(full[i]).margin(1e-6).epsilon(1e-5));
  CHECK(a->count_correct(y.data()) >= 0);
  CHECK_THROWS_AS(a->forward(x.data(), 5, false), ShapeError);
  CHECK_THROWS_AS(a->backward(), ShapeError);  // last forward was eval
}

TEST_CASE("init follows torchvision: Kaiming fan_out convs, BN ones, zero-init residual",
          "[engine][model]") {
  ModelConfig c;
  c.name = "resnet18";
  c.zero_init_residual = true;
  auto m = Model::create(c);
  m->build(1, 32, 32);
  m->init(42);
  const auto& w = m->parameter("layer3.0.conv1.weight");  // (256,128,3,3): std sqrt(2/(256*9))
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    s += w.value[i];
    s2 += double(w.value[i]) * w.value[i];
  }
  const double mean = s / w.numel(), sd = std::sqrt(s2 / w.numel() - mean * mean);
  CHECK(std::abs(mean) < 2e-3);
  CHECK(sd == Approx(std::sqrt(2.0 / (256 * 9))).epsilon(0.01));
  CHECK(m->parameter("layer1.0.bn2.weight").value[0] == 0.0f);
  CHECK(m->parameter("layer1.0.bn1.weight").value[0] == 1.0f);
  CHECK(m->parameter("layer1.0.bn1.running_var").value[3] == 1.0f);
  const auto& fc = m->parameter("fc.weight");
  for (int64_t i = 0; i < fc.numel(); ++i) REQUIRE(std::abs(fc.value[i]) <= 1.0 / std::sqrt(512.0));
  // same seed, same weights; another seed, others
  auto m2 = Model::create(c);
  m2->build(1, 32, 32);
  m2->init(42);
  CHECK(std::equal(m->parameter_data(), m->parameter_data() + m->parameter_count(),
                   m2->parameter_data()));
  m2->init(43);
  CHECK(!std::equal(m->parameter_data(), m->parameter_data() + m->parameter_count(),
                    m2->parameter_data()));
}

TEST_CASE("the model table's FLOP counts equal the hand-counted ones", "[engine][model]") {
  // The values the model computed layer by layer by hand before the table (commit 0287042): conv
  // and fc forward, backward-data (not for the stem), backward-weights.
  ModelConfig c;
  c.name = "resnet8";
  c.num_classes = 10;
  c.in_channels = 1;
  auto r8 = Model::create(c);
  r8->build(4, 28, 28);
  CHECK(r8->training_flops_per_image() == 55849728.0);
  // stem 3x3, 1 -> 16 channels on 28x28: 2 * 28*28*16 * 1*3*3
  CHECK(r8->layer_flops_per_image("conv1") == 2.0 * 28 * 28 * 16 * 9);
  CHECK(r8->layer_flops_per_image("layer3.0.downsample.0") == 2.0 * 7 * 7 * 64 * 32);
  CHECK(r8->layer_flops_per_image("fc") == 2.0 * 64 * 10);
  CHECK(r8->layer_flops_per_image("bn1") == 0.0);
  c.name = "resnet50";
  c.num_classes = 1000;
  c.in_channels = 3;
  auto r50 = Model::create(c);
  r50->build(1, 224, 224);
  CHECK(r50->training_flops_per_image() == 24299077632.0);
  CHECK(r50->layer_flops_per_image("conv1") == 2.0 * 112 * 112 * 64 * 3 * 49);
  CHECK(r50->layer_flops_per_image("layer4.2.conv3") == 2.0 * 7 * 7 * 2048 * 512);
  CHECK(r50->layer_flops_per_image("maxpool") == 0.0);
  CHECK(r50->layer_flops_per_image("no such layer") == 0.0);
  c.num_classes = 7;
  auto r50_small = Model::create(c);
  r50_small->build(2, 64, 64);
  CHECK(r50_small->training_flops_per_image() == 1982681088.0);
}

TEST_CASE("the parameter table is in PyTorch's state_dict order", "[engine][model][torch]") {
  struct Case {
    const char* name;
    int classes, channels;
  };
  for (const Case& k :
       {Case{"resnet8", 10, 1}, Case{"resnet18", 1000, 3}, Case{"resnet50", 1000, 3}}) {
    // state_dict keys and shapes, one per line, from tools/weights/cifar_resnet.py's build_model
    const std::string cmd =
        nostrum::testing::torch_python() + " -c \"import sys; sys.path.insert(0, '" +
        nostrum::testing::source_dir() + "/tools/weights'); import cifar_resnet as c; " +
        "m = c.build_model('" + k.name + "', " + std::to_string(k.classes) + ", " +
        std::to_string(k.channels) + "); " +
        "print('\\n'.join(n + ' ' + str(tuple(t.shape)) for n, t in m.state_dict().items()))\"";
    INFO("running: " << cmd);
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buffer[4096];
    while (size_t got = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, got);
    REQUIRE(pclose(pipe) == 0);
    ModelConfig config;
    config.name = k.name;
    config.num_classes = k.classes;
    config.in_channels = k.channels;
    auto m = Model::create(config);
    m->build(1, 32, 32);
    std::string ours;
    for (const auto& p : m->parameters()) {
      // PyTorch prints (64,) for one dimension and () for none; Shape::str() prints (64) and ().
      std::string shape = p.shape.str();
      if (p.shape.rank() == 1) shape.insert(shape.size() - 1, ",");
      ours += p.name + " " + shape + "\n";
    }
    CHECK(ours == out);
  }
}
