// MlLogger: the exact line format, value types, escaping, NaN/Infinity never printed, rank 0 only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "nostrum/core/error.hpp"
#include "nostrum/log/mllog.hpp"
#include "test_paths.hpp"

using nostrum::log::LogValue;
using nostrum::log::MlLogger;

namespace {
std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("an MLPerf line has every field in the official order and format", "[log]") {
  const std::string line =
      MlLogger::format(MlLogger::EventType::kIntervalEnd, 1700000000123, {"src/train/main.cpp", 42},
                       "epoch_stop", nullptr, {{"epoch_num", 3}});
  CHECK(line ==
        ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000123, \"event_type\": "
        "\"INTERVAL_END\", \"key\": \"epoch_stop\", \"value\": null, \"metadata\": {\"file\": "
        "\"src/train/main.cpp\", \"lineno\": 42, \"epoch_num\": 3}}");
}

TEST_CASE("log values: bool, integers, doubles that read back exactly, escaped strings", "[log]") {
  CHECK(LogValue(true).json() == "true");
  CHECK(LogValue(int64_t{-7}).json() == "-7");
  CHECK(LogValue(size_t{1281167}).json() == "1281167");
  CHECK(LogValue(0.0001).json() == "0.0001");
  CHECK(LogValue(2.0).json() == "2.0");
  CHECK(LogValue(0.0).json() == "0.0");
  CHECK(LogValue(0.1f).json() == "0.1");  // floats log as their shortest decimal
  CHECK(LogValue(0.0001f).json() == "0.0001");
  CHECK(LogValue(0.9f).json() == "0.9");
  CHECK(LogValue(0.1f + 0.2f).json() == "0.3");  // 0.3f is the nearest float: same value
  CHECK(LogValue(16777217.0f).json() == "16777216.0");
  CHECK(std::stod(LogValue(1.0 / 3.0).json()) == 1.0 / 3.0);
  CHECK(LogValue("a\"b\\c\n").json() == "\"a\\\"b\\\\c\\n\"");
  CHECK(LogValue().json() == "null");
}

TEST_CASE("NaN and Infinity are never printed: null plus a note", "[log]") {
  const char* note = nullptr;
  CHECK(LogValue(std::nan("")).json(&note) == "null");
  REQUIRE(note != nullptr);
  CHECK(std::string(note) == "nan");
  CHECK(LogValue(-std::numeric_limits<double>::infinity()).json(&note) == "null");
  CHECK(std::string(note) == "-inf");
  const std::string line = MlLogger::format(MlLogger::EventType::kPointInTime, 5, {"x.cpp", 1},
                                            "eval_accuracy", std::numeric_limits<float>::infinity(),
                                            {{"epoch_num", 1}, {"loss", std::nan("")}});
  CHECK(line.find("NaN") == std::string::npos);
  CHECK(line.find("nan,") == std::string::npos);
  CHECK(line.find("Infinity") == std::string::npos);
  CHECK(line.find("\"value\": null") != std::string::npos);
  CHECK(line.find("\"value_nonfinite\": \"inf\"") != std::string::npos);
  CHECK(line.find("\"loss\": null, \"loss_nonfinite\": \"nan\"") != std::string::npos);
}

TEST_CASE("the logger writes on rank 0 only, one flushed line per call", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("mllog");
  {
    MlLogger rank1(false, (dir / "rank1.log").string(), true);
    rank1.event(NOSTRUM_HERE, nostrum::log::keys::kSeed, 1);
    CHECK_FALSE(rank1.enabled());
  }
  CHECK_FALSE(std::filesystem::exists(dir / "rank1.log"));
  MlLogger rank0(true, (dir / "rank0.log").string(), false);
  rank0.event(NOSTRUM_HERE, nostrum::log::keys::kSeed, 1);
  rank0.start(NOSTRUM_HERE, nostrum::log::keys::kRunStart);
  const std::string text = read_all(dir / "rank0.log");  // readable before close: flushed
  CHECK(text.find("\"key\": \"seed\", \"value\": 1,") != std::string::npos);
  CHECK(text.find("\"INTERVAL_START\", \"key\": \"run_start\"") != std::string::npos);
  CHECK(text.find("mllog_test.cpp") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK_THROWS_AS(MlLogger(true, (dir / "no" / "such" / "dir.log").string(), false),
                  nostrum::IoError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a resumed run's logger keeps the log up to the checkpoint and appends", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("mllog-resume");
  const std::string path = (dir / "run.log").string();
  int64_t at_checkpoint = 0;
  {
    MlLogger first(true, path, false);
    first.start(NOSTRUM_HERE, nostrum::log::keys::kRunStart);
    at_checkpoint = first.file_bytes();
    first.start(NOSTRUM_HERE, nostrum::log::keys::kEpochStart);  // after the checkpoint: dropped
  }
  CHECK(at_checkpoint > 0);
  {
    MlLogger resumed(true, path, false, at_checkpoint);
    resumed.end(NOSTRUM_HERE, nostrum::log::keys::kRunStop);
  }
  const std::string text = read_all(dir / "run.log");
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);
  CHECK(text.find("run_start") != std::string::npos);
  CHECK(text.find("epoch_start") == std::string::npos);
  CHECK(text.find("run_stop") != std::string::npos);
  // A log shorter than the checkpoint says (replaced?) is refused, naming the file.
  CHECK_THROWS_AS(MlLogger(true, path, false, int64_t{1} << 40), nostrum::IoError);
  CHECK_THROWS_AS(MlLogger(true, (dir / "missing.log").string(), false, 0), nostrum::IoError);
  std::filesystem::remove_all(dir);
}
