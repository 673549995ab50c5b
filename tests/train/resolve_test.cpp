// resolve (src/train/resolve.hpp) on command lines parsed as nostrum-train parses them: every
// combination in which an option would be ignored is refused with an OptionError naming both
// options (and accepted once the other option is there); --nesterov reaches LARS; the MLPerf log
// says "closed" for a compliant LARS recipe with either weight-decay flag (LARS exempts BN and
// bias parameters always), and "open" for SGD with --decay-bias-and-norm.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/optim/lars.hpp"
#include "observers.hpp"
#include "resolve.hpp"
#include "setup.hpp"
#include "synthetic_dataset.hpp"

using namespace nostrum;
using train::RunConfig;
using train::TrainOptions;

namespace {

// A small synthetic dataset of the given image kind (made once per kind).
std::string dataset(io::ImageKind kind) {
  const std::string path =
      testing::process_temp_dir() + (kind == io::ImageKind::raw ? "/raw" : "/jpeg");
  if (std::filesystem::exists(path + "/manifest.txt")) return path;
  return testing::write_synthetic_dataset(path, kind, 48, 12, 8);
}

// nostrum-train's parse of `args` after --data <dataset> and the options of a small, quiet run.
TrainOptions parse(std::initializer_list<std::string> args,
                   io::ImageKind kind = io::ImageKind::raw) {
  std::vector<std::string> words = {"nostrum-train",    "--data", dataset(kind), "--quiet",
                                    "--batch-size",     "8",      "--threads",   "1",
                                    "--loader-threads", "1"};
  words.insert(words.end(), args);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  TrainOptions o;
  REQUIRE(train::parse_train_options(static_cast<int>(argv.size()), argv.data(), o));
  return o;
}

// resolve refuses `options` with an OptionError whose message names both options.
void check_refused(const TrainOptions& options, const std::string& option,
                   const std::string& other) {
  try {
    train::resolve(options);
    FAIL("resolve accepted " + option + " where " + other + " makes it ignored");
  } catch (const OptionError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find(option) != std::string::npos);
    CHECK(message.find(other) != std::string::npos);
  }
}

std::vector<std::string> division_of(const RunConfig& config) {
  const mpi::Communicator world;
  std::unique_ptr<train::Run> run = train::setup_run(config, world);
  return train::closed_division_violations(*run);
}

// The submission_division line the MLPerf observer writes for this configuration.
std::string logged_division(RunConfig config) {
  const std::string path = testing::process_temp_dir() + "/mllog.txt";
  config.logging.mllog = path;
  const mpi::Communicator world;
  std::unique_ptr<train::Run> run = train::setup_run(config, world);
  {
    train::MlperfObserver mlperf(run->config.logging, /*rank0=*/true);
    mlperf.on_setup_done(*run);
  }
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line))
    if (line.find("\"submission_division\"") != std::string::npos) return line;
  return {};
}

}  // namespace

TEST_CASE("--sync-bn-group without --sync-bn is refused", "[resolve]") {
  check_refused(parse({"--sync-bn-group", "2"}), "--sync-bn-group", "--sync-bn");
  CHECK(train::resolve(parse({"--sync-bn", "--sync-bn-group", "2"})).parallel.sync_bn_group == 2);
}

TEST_CASE("--checkpoint-every without --checkpoint-dir is refused", "[resolve]") {
  check_refused(parse({"--checkpoint-every", "30m"}), "--checkpoint-every", "--checkpoint-dir");
  const RunConfig c = train::resolve(parse({"--checkpoint-every", "30m", "--checkpoint-dir", "x"}));
  CHECK(c.checkpoint.every_minutes == 30.0);
  CHECK(c.checkpoint.every_epochs == 0);
}

TEST_CASE("--keep-checkpoints without --checkpoint-dir is refused", "[resolve]") {
  check_refused(parse({"--keep-checkpoints", "5"}), "--keep-checkpoints", "--checkpoint-dir");
  CHECK(
      train::resolve(parse({"--keep-checkpoints", "5", "--checkpoint-dir", "x"})).checkpoint.keep ==
      5);
}

TEST_CASE("--lars-eta with --optimizer sgd is refused", "[resolve]") {
  check_refused(parse({"--lars-eta", "0.002"}), "--lars-eta", "--optimizer");
  check_refused(parse({"--optimizer", "sgd", "--lars-eta", "0.002"}), "--lars-eta", "--optimizer");
  const RunConfig c = train::resolve(parse({"--optimizer", "lars", "--lars-eta", "0.002"}));
  CHECK(c.optimizer.lars_eta == 0.002);
}

TEST_CASE("--poly-power with another --lr-schedule is refused", "[resolve]") {
  check_refused(parse({"--lr-schedule", "cosine", "--poly-power", "3"}), "--poly-power",
                "--lr-schedule");
  CHECK(train::resolve(parse({"--poly-power", "3"})).schedule.poly_power == 3.0);  // poly: default
  CHECK(train::resolve(parse({"--lr-schedule", "cosine"})).schedule.kind ==
        optim::ScheduleKind::kCosine);
}

TEST_CASE("--pad-crop on JPEG data is refused", "[resolve]") {
  check_refused(parse({"--pad-crop", "4"}, io::ImageKind::jpeg), "--pad-crop", "--data");
  CHECK(train::resolve(parse({}, io::ImageKind::jpeg)).data.pad_crop == 0);  // the default: off
  CHECK(train::resolve(parse({"--pad-crop", "2"})).data.pad_crop == 2);      // raw images
}

TEST_CASE("--resume and --eval-only need their partners", "[resolve]") {
  check_refused(parse({"--resume"}), "--resume", "--checkpoint-dir");
  check_refused(parse({"--resume", "--checkpoint-dir", "x", "--resume-from", "x/c.h5"}), "--resume",
                "--resume-from");
  check_refused(parse({"--eval-only"}), "--eval-only", "--init-weights");
  CHECK(train::resolve(parse({"--resume", "--checkpoint-dir", "x"})).checkpoint.resuming());
}

TEST_CASE("--nesterov reaches LARS", "[resolve]") {
  const RunConfig c = train::resolve(parse({"--optimizer", "lars", "--nesterov"}));
  CHECK(c.optimizer.nesterov);
  const mpi::Communicator world;
  std::unique_ptr<train::Run> run = train::setup_run(c, world);
  const auto* lars = dynamic_cast<const optim::Lars*>(run->optimizer.get());
  REQUIRE(lars != nullptr);
  CHECK(lars->options().nesterov);
  const RunConfig plain = train::resolve(parse({"--optimizer", "lars"}));
  run = train::setup_run(plain, world);
  CHECK_FALSE(dynamic_cast<const optim::Lars*>(run->optimizer.get())->options().nesterov);
}

TEST_CASE("the MLPerf division is closed for LARS with either weight-decay flag", "[resolve]") {
  // A LARS recipe inside the closed rules: poly power 2, end LR 0.0001, warm-up > 0, WD 0.0001.
  const RunConfig lars =
      train::resolve(parse({"--optimizer", "lars", "--epochs", "2", "--warmup-epochs", "1"}));
  const RunConfig lars_decay = train::resolve(parse(
      {"--optimizer", "lars", "--epochs", "2", "--warmup-epochs", "1", "--decay-bias-and-norm"}));
  CHECK(lars_decay.optimizer.exempt_bias_and_norm);  // what LARS does
  CHECK(division_of(lars).empty());
  CHECK(division_of(lars_decay).empty());
  CHECK(logged_division(lars).find("\"closed\"") != std::string::npos);
  CHECK(logged_division(lars_decay).find("\"closed\"") != std::string::npos);
  bool noted = false;
  for (const auto& note : lars_decay.notes)
    noted |= note.find("--decay-bias-and-norm") != std::string::npos;
  CHECK(noted);

  // Negative control: SGD does decay BN and bias parameters with the flag, and the log says open.
  const RunConfig sgd_decay = train::resolve(
      parse({"--optimizer", "sgd", "--epochs", "2", "--lr", "0.1", "--decay-bias-and-norm"}));
  CHECK_FALSE(sgd_decay.optimizer.exempt_bias_and_norm);
  const std::vector<std::string> violations = division_of(sgd_decay);
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].find("exempts BN and bias") != std::string::npos);
  CHECK(logged_division(sgd_decay).find("\"open\"") != std::string::npos);
}
