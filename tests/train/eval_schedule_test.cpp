// Which epochs nostrum-train evaluates after: --eval-every and --eval-offset as parsed from the
// command line and from the ResNet-50 MLPerf recipe (jobs/resnet50_imagenet_mlperf.ini).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nostrum/core/error.hpp"
#include "resolve.hpp"
#include "test_paths.hpp"
#include "train_options.hpp"

namespace {

// nostrum-train's option parsing of args (throws OptionError as nostrum-train would stop).
nostrum::train::TrainOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nostrum-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  nostrum::train::TrainOptions o;
  const bool run = nostrum::train::parse_train_options(int(argv.size()), argv.data(), o);
  REQUIRE(run);
  return o;
}

std::vector<int> evaluated_epochs(const nostrum::train::TrainOptions& o) {
  std::vector<int> epochs;
  const nostrum::train::EvaluationConfig evaluation = nostrum::train::resolve_evaluation(o);
  for (int e = 1; e <= o.epochs; ++e)
    if (evaluation.due_after(e)) epochs.push_back(e);
  return epochs;
}

}  // namespace

TEST_CASE("the ResNet-50 recipe evaluates after NVIDIA's epochs 3, 7, ..., 35 and the last",
          "[eval-schedule]") {
  const auto o =
      parse({"--config", nostrum::testing::source_dir() + "/jobs/resnet50_imagenet_mlperf.ini",
             "--data", "unused"});
  CHECK(o.eval_every == 4);
  CHECK(o.eval_offset == 2);
  CHECK(evaluated_epochs(o) == std::vector<int>{3, 7, 11, 15, 19, 23, 27, 31, 35, 37});
}

TEST_CASE("without eval-offset evaluations follow epochs N, 2N, ... and the last",
          "[eval-schedule]") {
  CHECK(evaluated_epochs(parse({"--data", "d", "--epochs", "10", "--eval-every", "4"})) ==
        std::vector<int>{4, 8, 10});
  CHECK(evaluated_epochs(parse({"--data", "d", "--epochs", "3"})) == std::vector<int>{1, 2, 3});
}

TEST_CASE("eval-offset K puts the first evaluation after epoch K + 1", "[eval-schedule]") {
  CHECK(evaluated_epochs(parse({"--data", "d", "--epochs", "12", "--eval-every", "4",
                                "--eval-offset", "0"})) == std::vector<int>{1, 5, 9, 12});
  CHECK(evaluated_epochs(parse({"--data", "d", "--epochs", "12", "--eval-every", "3",
                                "--eval-offset", "5"})) == std::vector<int>{6, 9, 12});
  try {
    parse({"--data", "d", "--eval-offset", "-2"});
    FAIL("--eval-offset -2 was accepted");
  } catch (const nostrum::OptionError& e) {
    CHECK(std::string(e.what()).find("--eval-offset") != std::string::npos);
  }
}
