// SGD against torch.optim.SGD and LARS against a re-implementation of MLPerf's LARS, run live by
// /usr/bin/python3 on the same random tensors and gradients for 12 steps; plus option errors.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/parameter.hpp"
#include "nostrum/optim/lars.hpp"
#include "nostrum/optim/sgd.hpp"
#include "test_paths.hpp"

using nostrum::Arena;
using nostrum::Parameter;
using nostrum::ParameterKind;
using nostrum::ParameterTable;
using nostrum::Shape;

namespace {

constexpr int kSteps = 12;

// A small model's table: a conv weight big enough for several LARS norm blocks, a linear weight, a
// bias, BN gamma/beta and a buffer that must stay put (conv1 and bn1 get all-zero gradients in a
// step).
struct Model {
  Arena values, grads;
  ParameterTable table;
  size_t total = 0;  // trainable floats

  Model() {
    const std::vector<std::pair<std::string, std::pair<Shape, ParameterKind>>> specs = {
        {"conv1.weight", {Shape{50, 20, 4, 5}, ParameterKind::kWeight}},
        {"bn1.weight", {Shape{50}, ParameterKind::kNormScale}},
        {"bn1.bias", {Shape{50}, ParameterKind::kNormShift}},
        {"bn1.running_mean", {Shape{50}, ParameterKind::kBuffer}},
        {"fc.weight", {Shape{10, 33}, ParameterKind::kWeight}},
        {"fc.bias", {Shape{10}, ParameterKind::kBias}},
    };
    size_t capacity = 0;
    for (const auto& s : specs)
      capacity += Arena::padded(static_cast<size_t>(s.second.first.numel()));
    values = Arena(capacity, "parameters");
    grads = Arena(capacity, "gradients");
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (const auto& s : specs) {
      Parameter p;
      p.name = s.first;
      p.shape = s.second.first;
      p.kind = s.second.second;
      p.value = values.take(static_cast<size_t>(p.numel()), p.name);
      p.offset = values.offset_of(p.value);
      p.grad = p.trainable() ? grads.take(static_cast<size_t>(p.numel()), p.name) : nullptr;
      if (!p.trainable()) grads.take(static_cast<size_t>(p.numel()), p.name);
      for (int64_t i = 0; i < p.numel(); ++i) p.value[i] = normal(rng);
      if (p.trainable()) total += static_cast<size_t>(p.numel());
      table.push_back(p);
    }
  }

  // Trainable values (or gradients) concatenated in table order.
  std::vector<float> flat(bool gradient) const {
    std::vector<float> out;
    for (const Parameter& p : table)
      if (p.trainable())
        out.insert(out.end(), (gradient ? p.grad : p.value),
                   (gradient ? p.grad : p.value) + p.numel());
    return out;
  }
};

// Deterministic gradients for step k. At step 3 conv1.weight's gradient is all zero: LARS adapts
// that tensor, so its g_norm == 0 guard runs (trust 1, the update is the weight decay alone;
// without the guard the trust would be eta / weight_decay); bn1.weight's too (exempt anyway).
void fill_gradients(Model& m, int step) {
  std::mt19937 rng(777 + step);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (Parameter& p : m.table) {
    if (!p.trainable()) continue;
    for (int64_t i = 0; i < p.numel(); ++i) p.grad[i] = normal(rng);
    if (step == 3 && (p.name == "conv1.weight" || p.name == "bn1.weight"))
      for (int64_t i = 0; i < p.numel(); ++i) p.grad[i] = 0.0f;
  }
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  REQUIRE(f.good());
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  REQUIRE(f.good());
  const auto bytes = static_cast<size_t>(f.tellg());
  std::vector<float> v(bytes / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  return v;
}

// Runs `optimizer` kSteps steps with learning rates `lrs` and the Python reference on the same
// data; every trainable value after every step must agree within |a - b| <= atol + rtol |b|.
void compare_with_reference(const std::string& tag, const std::string& optimizer_json,
                            bool exempt_bias_and_norm, const std::vector<float>& lrs,
                            nostrum::optim::Optimizer& opt, Model& m, double rtol, double atol) {
  const auto dir = nostrum::testing::scratch_dir(tag);
  std::ostringstream cfg;
  cfg << std::setprecision(9) << "{" << optimizer_json << ", \"lrs\": [";
  for (size_t k = 0; k < lrs.size(); ++k) cfg << (k ? ", " : "") << lrs[k];
  cfg << "], \"tensors\": [";
  bool first = true;
  for (const Parameter& p : m.table) {
    if (!p.trainable()) continue;
    cfg << (first ? "" : ", ") << "{\"name\": \"" << p.name << "\", \"shape\": [";
    for (int a = 0; a < p.shape.rank(); ++a) cfg << (a ? ", " : "") << p.shape[a];
    cfg << "], \"exempt_decay\": "
        << ((exempt_bias_and_norm && p.is_bias_or_norm()) ? "true" : "false") << "}";
    first = false;
  }
  cfg << "]}";
  std::ofstream(dir / "config.json") << cfg.str();
  write_floats(dir / "init.bin", m.flat(false));

  const Parameter& buffer = m.table[3];
  const std::vector<float> buffer_before(buffer.value, buffer.value + buffer.numel());
  const std::vector<float> initial = m.flat(false);
  std::vector<float> all_grads, ours;
  for (int k = 0; k < kSteps; ++k) {
    fill_gradients(m, k);
    const auto g = m.flat(true);
    all_grads.insert(all_grads.end(), g.begin(), g.end());
    opt.step(lrs[k]);
    const auto v = m.flat(false);
    ours.insert(ours.end(), v.begin(), v.end());
  }
  write_floats(dir / "grads.bin", all_grads);
  const std::string command = nostrum::testing::torch_python() + " " +
                              nostrum::testing::source_dir() + "/tests/optim/optim_reference.py " +
                              dir.string();
  REQUIRE(std::system(command.c_str()) == 0);
  const auto reference = read_floats(dir / "values.bin");
  REQUIRE(reference.size() == ours.size());
  double worst = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(ours[i]) - reference[i]);
    worst = std::max(worst, diff / (atol + rtol * std::fabs(reference[i])));
    if (diff > atol + rtol * std::fabs(reference[i])) ++bad;
  }
  INFO(tag << ": worst |diff| / tolerance = " << worst << ", elements out of tolerance: " << bad);
  CHECK(bad == 0);
  if (std::getenv("NOSTRUM_SHOW_ERROR")) WARN(tag << ": worst |diff| / tolerance = " << worst);
  // Every step moved the weights (the comparison is not vacuous) and the buffer never moved.
  CHECK(initial != m.flat(false));
  for (int64_t i = 0; i < buffer.numel(); ++i) REQUIRE(buffer.value[i] == buffer_before[i]);
  std::filesystem::remove_all(dir);
}

std::vector<float> varying_lrs(float base) {
  std::vector<float> lrs;
  for (int k = 0; k < kSteps; ++k) lrs.push_back(base * (1.0f + 0.5f * std::sin(0.7f * k)));
  return lrs;
}

std::string sgd_json(const nostrum::optim::SgdOptions& o) {
  std::ostringstream s;
  s << std::setprecision(9) << "\"optimizer\": \"sgd\", \"options\": {\"momentum\": " << o.momentum
    << ", \"dampening\": " << o.dampening << ", \"nesterov\": " << (o.nesterov ? "true" : "false")
    << ", \"weight_decay\": " << o.weight_decay << "}";
  return s.str();
}

}  // namespace

// fp32 tolerance: each step rounds a handful of times (relative 6e-8 each); torch's vectorised
// kernels may fuse multiply-adds where we do not, so values may differ by a few ulp per step,
// compounding over 12 steps through the momentum buffer.
TEST_CASE("SGD matches torch.optim.SGD (plain, momentum, Nesterov, decay, exemption)", "[optim]") {
  struct Case {
    const char* tag;
    nostrum::optim::SgdOptions options;
  };
  const Case cases[] = {
      {"sgd-plain", {0.0f, 0.0f, false, 0.0f, false}},
      {"sgd-momentum", {0.9f, 0.0f, false, 0.0f, false}},
      {"sgd-dampening", {0.9f, 0.1f, false, 0.0f, false}},
      {"sgd-nesterov", {0.9f, 0.0f, true, 0.0f, false}},
      {"sgd-decay", {0.9f, 0.0f, false, 5e-4f, false}},
      {"sgd-nesterov-decay-exempt", {0.875f, 0.0f, true, 5e-2f, true}},
  };
  for (const Case& c : cases) {
    SECTION(c.tag) {
      Model m;
      nostrum::optim::Sgd sgd(m.table, c.options);
      CHECK(sgd.name() == "sgd");
      compare_with_reference(c.tag, sgd_json(c.options), c.options.exempt_bias_and_norm_from_decay,
                             varying_lrs(0.3f), sgd, m, 1e-5, 1e-7);
      CHECK(sgd.steps_taken() == kSteps);
    }
  }
}

TEST_CASE("LARS matches MLPerf's reference LARS (TF LARSOptimizer), BN and bias exempt",
          "[optim]") {
  for (bool nesterov : {false, true}) {
    SECTION(nesterov ? "nesterov" : "heavy-ball") {
      Model m;
      nostrum::optim::LarsOptions o;
      o.momentum = 0.9f;
      o.weight_decay = 5e-5f;
      o.eta = 0.001f;
      o.epsilon = 0.0f;
      o.nesterov = nesterov;
      nostrum::optim::Lars lars(m.table, o);
      std::ostringstream json;
      json << std::setprecision(9)
           << "\"optimizer\": \"lars\", \"options\": {\"momentum\": " << o.momentum
           << ", \"weight_decay\": " << o.weight_decay << ", \"eta\": " << o.eta
           << ", \"epsilon\": " << o.epsilon << ", \"nesterov\": " << (nesterov ? "true" : "false")
           << "}";
      // LARS runs at large base rates (the trust ratio is ~eta |w|/|g|).
      compare_with_reference(nesterov ? "lars-nesterov" : "lars", json.str(), true,
                             varying_lrs(9.0f), lars, m, 1e-5, 1e-7);
      // Exempt tensors (bn1.weight, bn1.bias, fc.bias) keep trust 1, weights get eta-scaled ones.
      const auto& trust = lars.last_trust_ratios();
      REQUIRE(trust.size() == 5);
      CHECK(trust[1] == 1.0);
      CHECK(trust[2] == 1.0);
      CHECK(trust[4] == 1.0);
      CHECK(trust[0] > 0.0);
      CHECK(trust[0] < 0.5);
    }
  }
}

TEST_CASE("LARS and SGD give bit-identical results for 1 and 3 threads", "[optim]") {
  std::vector<float> results[2][2];
  const int saved = omp_get_max_threads();
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 3);
    Model a, b;
    nostrum::optim::Lars lars(a.table, {});
    nostrum::optim::Sgd sgd(b.table, {0.9f, 0.0f, true, 1e-4f, true});
    for (int k = 0; k < 3; ++k) {
      fill_gradients(a, k);
      fill_gradients(b, k);
      lars.step(5.0f);
      sgd.step(0.1f);
    }
    results[run][0] = a.flat(false);
    results[run][1] = b.flat(false);
  }
  omp_set_num_threads(saved);
  CHECK(results[0][0] == results[1][0]);
  CHECK(results[0][1] == results[1][1]);
}

TEST_CASE("optimizers reject bad options with an OptionError naming the option", "[optim]") {
  Model m;
  nostrum::optim::SgdOptions nesterov_without_momentum{0.0f, 0.0f, true, 0.0f, false};
  CHECK_THROWS_AS(nostrum::optim::Sgd(m.table, nesterov_without_momentum), nostrum::OptionError);
  nostrum::optim::SgdOptions negative_decay{0.9f, 0.0f, false, -1.0f, false};
  CHECK_THROWS_WITH(nostrum::optim::Sgd(m.table, negative_decay),
                    Catch::Contains("--weight-decay"));
  nostrum::optim::LarsOptions bad_eta;
  bad_eta.eta = 0.0f;
  CHECK_THROWS_WITH(nostrum::optim::Lars(m.table, bad_eta), Catch::Contains("--lars-eta"));
}

TEST_CASE("optimizer state is one arena sized from the table", "[optim]") {
  Model m;
  nostrum::optim::Sgd sgd(m.table, {});
  size_t expected = 0;
  for (const Parameter& p : m.table)
    if (p.trainable()) expected += Arena::padded(static_cast<size_t>(p.numel()));
  CHECK(sgd.state().used() == expected);
  CHECK(sgd.state().capacity() == expected);
}
