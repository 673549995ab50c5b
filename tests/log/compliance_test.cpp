// tools/mlperf/check_log.py on logs written by MlLogger: a good ResNet log (LARS and SGD) passes;
// a missing key, NaN, wrong order, an illegal hyperparameter or a missed target fails. Also
// tools/mlperf/score.py: olympic average, failed runs, wrong run counts.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nostrum/log/mllog.hpp"
#include "nostrum/log/resnet_hyperparameters.hpp"
#include "test_paths.hpp"

using nostrum::log::LogValue;
using nostrum::log::MlLogger;
namespace keys = nostrum::log::keys;

namespace {

struct Recipe {
  nostrum::optim::OptimizerKind optimizer = nostrum::optim::OptimizerKind::kLars;
  double base_lr = 10.5;
  double end_lr = 0.0001;
  double weight_decay = 0.00005;  // 0.0001 * 2^-1
  double poly_power = 2.0;
  double accuracy = 0.7601;
  const char* status = keys::kSuccess;
};

// The event sequence nostrum-train writes for a ResNet run (4 epochs, evaluation every 2).
void write_log(const std::string& path, const Recipe& r) {
  MlLogger log(true, path, false);
  log.event(NOSTRUM_HERE, keys::kCacheClear, true);
  log.start(NOSTRUM_HERE, keys::kInitStart);
  log.event(NOSTRUM_HERE, keys::kSubmissionBenchmark, keys::kResnet);
  log.event(NOSTRUM_HERE, keys::kSubmissionOrg, "nostrum");
  log.event(NOSTRUM_HERE, keys::kSubmissionDivision, keys::kClosed);
  log.event(NOSTRUM_HERE, keys::kSubmissionStatus, keys::kOnprem);
  log.event(NOSTRUM_HERE, keys::kSubmissionPlatform, "2xEPYC \"test\" node");
  log.event(NOSTRUM_HERE, keys::kSeed, 42);
  log.event(NOSTRUM_HERE, keys::kGlobalBatchSize, 3264);
  log.event(NOSTRUM_HERE, keys::kGradientAccumulationSteps, 1);
  log.event(NOSTRUM_HERE, keys::kTrainSamples, 1281167);
  log.event(NOSTRUM_HERE, keys::kEvalSamples, 50000);
  nostrum::log::ResnetHyperparameters h;
  h.optimizer = r.optimizer;
  h.base_lr = r.base_lr;
  h.end_lr = r.end_lr;
  h.poly_power = r.poly_power;
  h.decay_steps = 2000;
  h.warmup_epochs = 2;
  h.momentum = 0.9;
  h.weight_decay = r.weight_decay;
  h.epsilon = 0.0;
  h.bn_span = 64;
  nostrum::log::log_hyperparameters(log, NOSTRUM_HERE, h);
  log.end(NOSTRUM_HERE, keys::kInitStop);
  log.start(NOSTRUM_HERE, keys::kRunStart);
  for (int first = 1; first <= 3; first += 2) {
    log.start(NOSTRUM_HERE, keys::kBlockStart, nullptr,
              {{keys::kFirstEpochNum, first}, {keys::kEpochCount, 2}});
    for (int e = first; e < first + 2; ++e) {
      log.start(NOSTRUM_HERE, keys::kEpochStart, nullptr, {{keys::kEpochNum, e}});
      log.end(NOSTRUM_HERE, keys::kEpochStop, nullptr, {{keys::kEpochNum, e}});
    }
    log.end(NOSTRUM_HERE, keys::kBlockStop, nullptr,
            {{keys::kFirstEpochNum, first}, {keys::kEpochCount, 2}});
    log.start(NOSTRUM_HERE, keys::kEvalStart, nullptr, {{keys::kEpochNum, first + 1}});
    log.event(NOSTRUM_HERE, keys::kEvalAccuracy, first == 1 ? 0.52 : r.accuracy,
              {{keys::kEpochNum, first + 1}});
    log.end(NOSTRUM_HERE, keys::kEvalStop, nullptr, {{keys::kEpochNum, first + 1}});
  }
  log.end(NOSTRUM_HERE, keys::kRunStop, nullptr, {{keys::kStatus, r.status}});
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream f(path);
  for (const auto& l : lines) f << l << "\n";
}

int exit_code(const std::string& command) {
  const int rc = std::system((command + " > /dev/null").c_str());
  REQUIRE(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

int check_log(const std::string& path, const std::string& extra = "") {
  return exit_code(nostrum::testing::torch_python() + " " + nostrum::testing::source_dir() +
                   "/tools/mlperf/check_log.py " + path + " " + extra);
}

// Index of the first line whose key is `key`.
size_t line_of(const std::vector<std::string>& lines, const std::string& key) {
  const std::string needle = "\"key\": \"" + key + "\"";
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(needle) != std::string::npos) return i;
  FAIL("no line with key " << key);
  return 0;
}

}  // namespace

TEST_CASE("a ResNet log written by MlLogger passes the compliance checker (LARS and SGD)",
          "[log]") {
  const auto dir = nostrum::testing::scratch_dir("compliance-good");
  Recipe lars;
  write_log((dir / "lars.log").string(), lars);
  CHECK(check_log((dir / "lars.log").string()) == 0);
  Recipe sgd;
  sgd.optimizer = nostrum::optim::OptimizerKind::kSgd;
  sgd.base_lr = 2.048;  // a multiple of 0.001
  sgd.weight_decay = 0.0002;
  write_log((dir / "sgd.log").string(), sgd);
  CHECK(check_log((dir / "sgd.log").string()) == 0);
  // A Fashion-MNIST demo log: 0.91 target instead of ImageNet's 0.759 (the value 0.7601 misses it).
  CHECK(check_log((dir / "lars.log").string(), "--accuracy-target 0.91") == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the compliance checker fails bad logs", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("compliance-bad");
  const std::string good = (dir / "good.log").string();
  write_log(good, Recipe{});
  REQUIRE(check_log(good) == 0);
  const auto lines = read_lines(good);
  const std::string bad = (dir / "bad.log").string();

  SECTION("a missing required key") {
    for (const char* key : {"submission_org", "cache_clear", "run_stop", "eval_samples",
                            "gradient_accumulation_steps", "lars_epsilon", "opt_name"}) {
      auto edited = lines;
      edited.erase(edited.begin() + static_cast<long>(line_of(lines, key)));
      write_lines(bad, edited);
      INFO("without " << key);
      CHECK(check_log(bad) == 1);
    }
  }
  SECTION("a duplicated EXACTLY_ONE key") {
    auto edited = lines;
    edited.push_back(lines[line_of(lines, "seed")]);
    edited.push_back(lines[line_of(lines, "train_samples")]);
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
  }
  SECTION("NaN or Infinity in a line") {
    for (const char* token : {"NaN", "Infinity", "-Infinity"}) {
      auto edited = lines;
      std::string& acc = edited[line_of(lines, "eval_accuracy")];
      acc.replace(acc.find("\"value\": ") + 9, 4, token);
      write_lines(bad, edited);
      INFO(token);
      CHECK(check_log(bad) == 1);
    }
  }
  SECTION("events out of order") {
    auto edited = lines;
    std::swap(edited[line_of(lines, "init_stop")], edited[line_of(lines, "run_start")]);
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
    edited = lines;
    const size_t stop = line_of(lines, "run_stop");
    edited.insert(edited.begin() + static_cast<long>(line_of(lines, "run_start")), lines[stop]);
    edited.erase(edited.begin() + static_cast<long>(stop) + 1);
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
  }
  SECTION("illegal hyperparameters") {
    Recipe r;
    r.end_lr = 0.001;  // LARS end LR must be 0.0001
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    r = Recipe{};
    r.weight_decay = 0.0003;  // not 0.0001 * 2^N
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    r = Recipe{};
    r.poly_power = 1.0;
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    r = Recipe{};
    r.optimizer = nostrum::optim::OptimizerKind::kSgd;
    r.base_lr = 0.1005;  // not a multiple of 0.001
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    r.base_lr = 0.1;
    write_log(bad, r);
    CHECK(check_log(bad) == 0);   // the same SGD log passes ...
    auto adam = read_lines(bad);  // an optimizer the closed division does not allow
    std::string& opt = adam[line_of(adam, "opt_name")];
    opt.replace(opt.find("\"sgd\""), 5, "\"adam\"");
    write_lines(bad, adam);
    CHECK(check_log(bad) == 1);  // ... until its opt_name is one the closed division does not allow
  }
  SECTION("target not reached, accuracy as a percentage, metadata missing") {
    Recipe r;
    r.accuracy = 0.7589;
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    r.accuracy = 76.1;
    write_log(bad, r);
    CHECK(check_log(bad) == 1);
    auto edited = lines;
    std::string& acc = edited[line_of(lines, "eval_accuracy")];
    acc.replace(acc.find(", \"epoch_num\""), std::string(", \"epoch_num\": 4").size(), "");
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
    edited = lines;
    std::string& stop = edited[line_of(lines, "run_stop")];
    stop.replace(stop.find(", \"status\""), std::string(", \"status\": \"success\"").size(), "");
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
  }
  SECTION("not a ResNet closed-division log") {
    auto edited = lines;
    std::string& div = edited[line_of(lines, "submission_division")];
    div.replace(div.find("\"closed\""), 8, "\"closed-ish\"");
    write_lines(bad, edited);
    CHECK(check_log(bad) == 1);
    write_lines(bad, {});
    CHECK(check_log(bad) == 1);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the C++ closed-division check agrees with the compliance checker", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("compliance-agree");
  const std::string path = (dir / "run.log").string();
  std::vector<Recipe> recipes(9);
  int passing = 0;
  recipes[1].end_lr = 0.0002;
  recipes[2].weight_decay = 0.00015;
  recipes[3].poly_power = 3.0;
  recipes[4].optimizer = nostrum::optim::OptimizerKind::kSgd;
  recipes[4].base_lr = 8.192;
  recipes[4].weight_decay = 0.0001;
  recipes[5] = recipes[4];
  recipes[5].base_lr = 8.1925;
  recipes[6] = recipes[4];
  recipes[6].weight_decay = 0.0005;
  recipes[7].weight_decay = 0.0001 / 8;
  recipes[8].base_lr = -1.0;
  for (size_t i = 0; i < recipes.size(); ++i) {
    const Recipe& r = recipes[i];
    nostrum::log::ResnetHyperparameters h;
    h.optimizer = r.optimizer;
    h.base_lr = r.base_lr;
    h.end_lr = r.end_lr;
    h.poly_power = r.poly_power;
    h.decay_steps = 2000;
    h.warmup_epochs = 2;
    h.weight_decay = r.weight_decay;
    h.bn_span = 64;
    const auto violations = nostrum::log::closed_division_violations(h);
    write_log(path, r);
    INFO("recipe " << i << (violations.empty() ? "" : ": " + violations.front()));
    CHECK(violations.empty() == (check_log(path) == 0));
    passing += violations.empty() ? 1 : 0;
  }
  CHECK(passing == 3);  // recipes 0, 4 and 7 comply; the other six break one rule each
  std::filesystem::remove_all(dir);
}

namespace {
// A minimal result log whose run lasts `seconds`, ending with `status`.
void write_result(const std::string& path, double seconds, const char* status) {
  const int64_t t0 = 1700000000000;
  std::ofstream f(path);
  f << MlLogger::format(MlLogger::EventType::kIntervalStart, t0, {"x.cpp", 1}, keys::kRunStart, {},
                        {})
    << "\n"
    << MlLogger::format(MlLogger::EventType::kIntervalEnd,
                        t0 + static_cast<int64_t>(seconds * 1000.0), {"x.cpp", 2}, keys::kRunStop,
                        {}, {{keys::kStatus, status}})
    << "\n";
}

std::string score(const std::vector<std::string>& logs, const std::string& extra, int* rc) {
  const auto out = std::filesystem::path(logs.front()).parent_path() / "score-out.txt";
  std::string command = nostrum::testing::torch_python() + " " + nostrum::testing::source_dir() +
                        "/tools/mlperf/score.py " + extra;
  for (const auto& l : logs) command += " " + l;
  const int status = std::system((command + " > " + out.string()).c_str());
  *rc = WEXITSTATUS(status);
  std::ifstream f(out);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("the scorer drops the fastest and slowest of 5 runs and averages the rest", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("score");
  std::vector<std::string> logs;
  const double seconds[] = {100.0, 130.0, 90.0, 400.0, 110.0};
  for (int i = 0; i < 5; ++i) {
    logs.push_back((dir / ("run" + std::to_string(i) + ".log")).string());
    write_result(logs.back(), seconds[i], keys::kSuccess);
  }
  int rc = -1;
  std::string out = score(logs, "--json", &rc);
  CHECK(rc == 0);
  CHECK(out.find("\"score_seconds\": 113.33333333333333") != std::string::npos);  // (100+130+110)/3
  // One failed run is the one dropped as slowest.
  write_result(logs[3], 20.0, keys::kAborted);
  out = score(logs, "--json", &rc);
  CHECK(rc == 0);
  CHECK(out.find("\"score_seconds\": 113.33333333333333") != std::string::npos);
  CHECK(out.find("\"failed_runs\": 1") != std::string::npos);
  // Two failed runs: no score.
  write_result(logs[0], 50.0, keys::kAborted);
  score(logs, "", &rc);
  CHECK(rc == 1);
  // Wrong number of logs, or a log without run_stop: bad input.
  score({logs[0], logs[1], logs[2], logs[4]}, "", &rc);
  CHECK(rc == 2);
  std::ofstream(logs[1]) << "no mllog lines\n";
  score(logs, "", &rc);
  CHECK(rc == 2);
  std::filesystem::remove_all(dir);
}
