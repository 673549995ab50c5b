// Checkpoint files: round trip, the weights layout, refusal of damaged and foreign files with the
// newest good one used instead, pruning, unwritable/full directories, and 20 SIGKILLs of a writer
// at random moments that never leave the directory without a loadable checkpoint.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "io/checkpoint.hpp"
#include "io/hdf5_util.hpp"
#include "io/weights_file.hpp"
#include "nostrum/core/error.hpp"
#include "temp_dir.hpp"

using namespace nostrum;
using nostrum::testing::TempDir;
namespace fs = std::filesystem;

namespace {

io::CheckpointIdentity identity() {
  io::CheckpointIdentity id;
  id.model = "resnet8 width 16";
  id.dataset = "manifest 1234abcd";
  id.train_samples = 1000;
  id.eval_samples = 200;
  id.global_batch = 64;
  return id;
}

// A state with `floats` values in its one big tensor (to make writes take a while).
io::CheckpointState make_state(int64_t steps, size_t floats = 1000) {
  io::CheckpointState s;
  s.identity = identity();
  s.options_text = "model = resnet8\nbatch-size = 32\n";
  s.integers = {{"ranks", 2},
                {"epoch", 3},
                {"step_in_epoch", 5},
                {io::kStepsTakenKey, steps},
                {"seed", static_cast<int64_t>(0xfedcba9876543210ULL)},
                {"block_first_epoch", 3}};
  s.reals = {{"seconds_spent", 123.5}, {"time_compute", 100.25}, {"time_data_wait", 3.5}};
  s.evals = {{1, 0.5, 40.0}, {2, 0.75, 80.0}};
  const auto n = static_cast<int64_t>(floats);
  io::NamedTensor w{
      "conv1.weight", n % 10 == 0 ? std::vector<int64_t>{n / 10, 10} : std::vector<int64_t>{n}, {}};
  for (size_t i = 0; i < floats; ++i) w.values.push_back(0.001f * i + static_cast<float>(steps));
  s.model.push_back(w);
  s.model.push_back({"bn1.running_mean", {3}, {0.5f, -1.0f, 2.0f}});
  s.model.push_back({"bn1.num_batches_tracked", {}, {7.0f}});
  s.optimizer_name = "sgd";
  s.optimizer_steps = steps;
  s.optimizer_state.assign(floats, 0.25f);
  s.rank_buffers = {0.5f, -1.0f, 2.0f, 7.0f, 0.25f, -2.0f, 4.0f, 7.0f};
  return s;
}

void expect_equal(const io::CheckpointState& a, const io::CheckpointState& b) {
  CHECK(a.identity.model == b.identity.model);
  CHECK(a.identity.dataset == b.identity.dataset);
  CHECK(a.identity.global_batch == b.identity.global_batch);
  CHECK(a.options_text == b.options_text);
  CHECK(a.integers == b.integers);
  CHECK(a.reals == b.reals);
  REQUIRE(a.evals.size() == b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) {
    CHECK(a.evals[i].epoch == b.evals[i].epoch);
    CHECK(a.evals[i].accuracy == b.evals[i].accuracy);
  }
  REQUIRE(a.model.size() == b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    CHECK(a.model[i].name == b.model[i].name);
    CHECK(a.model[i].shape == b.model[i].shape);
    CHECK(a.model[i].values == b.model[i].values);
  }
  CHECK(a.optimizer_name == b.optimizer_name);
  CHECK(a.optimizer_steps == b.optimizer_steps);
  CHECK(a.optimizer_state == b.optimizer_state);
  CHECK(a.rank_buffers == b.rank_buffers);
}

void truncate_file(const std::string& path, double keep_fraction) {
  const auto size = fs::file_size(path);
  fs::resize_file(path, static_cast<uintmax_t>(size * keep_fraction));
}

void flip_byte_at(const std::string& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("checkpoint round trip keeps every field", "[checkpoint]") {
  TempDir dir("ckpt");
  const io::CheckpointState state = make_state(42);
  const std::string path = io::write_checkpoint(dir.str(), state, 0);
  CHECK(fs::path(path).filename() == "checkpoint-000000000042.h5");
  expect_equal(io::read_checkpoint(path), state);
  expect_equal(io::load_checkpoint(path, identity()), state);
  // Nothing but the checkpoint is left in the directory (no temporary files).
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("a checkpoint of format version 1 is refused with what to do", "[checkpoint]") {
  TempDir dir("ckpt");
  const std::string path = io::write_checkpoint(dir.str(), make_state(7), 0);
  {
    std::lock_guard<std::mutex> lock(io::hdf5_mutex());
    io::H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    REQUIRE(file.valid());
    REQUIRE(H5Adelete(file.get(), "checkpoint_version") >= 0);  // as version 1 files are
  }
  const std::string why = error_of([&] { io::read_checkpoint(path); });
  CHECK_THAT(why, Catch::Contains("format version 1"));
  CHECK_THAT(why, Catch::Contains("start afresh"));
  CHECK_THAT(why, Catch::Contains(path));
  CHECK_THAT(why, !Catch::Contains("damaged"));  // refused for its version, not as damaged
  const io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), identity());
  CHECK(found.path.empty());
  REQUIRE(found.refused.size() == 1);
  CHECK_THAT(found.refused[0], Catch::Contains("format version 1"));
}

TEST_CASE("a checkpoint without the integer that names it is not written", "[checkpoint]") {
  TempDir dir("ckpt");
  io::CheckpointState state = make_state(3);
  state.integers.erase(io::kStepsTakenKey);
  CHECK_THAT(error_of([&] { io::write_checkpoint(dir.str(), state, 0); }),
             Catch::Contains(io::kStepsTakenKey));
}

TEST_CASE("checkpoint weights load as a weights file, and restore into a table", "[checkpoint]") {
  TempDir dir("ckpt");
  const io::CheckpointState state = make_state(1, 20);
  const std::string path = io::write_checkpoint(dir.str(), state, 0);
  std::vector<float> w(20, 0.0f), mean(3, 0.0f), tracked(1, 0.0f);
  ParameterTable table = {
      {"conv1.weight", Shape{2, 10}, ParameterKind::kWeight, w.data(), nullptr, 0},
      {"bn1.running_mean", Shape{3}, ParameterKind::kBuffer, mean.data(), nullptr, 0},
      {"bn1.num_batches_tracked", Shape{}, ParameterKind::kBuffer, tracked.data(), nullptr, 0}};
  io::load_weights(path, table);  // the engine's weights loader reads /model/<key>
  CHECK(w == state.model[0].values);
  CHECK(mean == state.model[1].values);
  CHECK(tracked[0] == 7.0f);

  std::fill(w.begin(), w.end(), 0.0f);
  io::restore_tensors(io::read_checkpoint(path).model, table, path);
  CHECK(w == state.model[0].values);
  CHECK(io::capture_tensors(table)[0].values == w);

  ParameterTable other = {table[0], table[1]};
  CHECK_THROWS_AS(io::restore_tensors(state.model, other, path), DataError);
}

TEST_CASE("a truncated or corrupted newest checkpoint is refused and the previous one used",
          "[checkpoint]") {
  TempDir dir("ckpt");
  io::write_checkpoint(dir.str(), make_state(10, 100000), 0);
  const std::string newest = io::write_checkpoint(dir.str(), make_state(20, 100000), 0);

  SECTION("truncated") {
    truncate_file(newest, 0.5);
    const std::string why = error_of([&] { io::read_checkpoint(newest); });
    CHECK_THAT(why, Catch::Contains(newest));
    io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), identity());
    CHECK(found.state.integers.at(io::kStepsTakenKey) == 10);
    CHECK(fs::path(found.path).filename() == "checkpoint-000000000010.h5");
    REQUIRE(found.refused.size() == 1);
    CHECK_THAT(found.refused[0], Catch::Contains("checkpoint-000000000020.h5"));
  }
  SECTION("one byte changed in the weights") {
    flip_byte_at(newest, static_cast<std::streamoff>(fs::file_size(newest) / 2));
    const std::string why = error_of([&] { io::read_checkpoint(newest); });
    CHECK_THAT(why, Catch::Contains("checksum mismatch"));
    io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), identity());
    CHECK(found.state.integers.at(io::kStepsTakenKey) == 10);
    REQUIRE(found.refused.size() == 1);
    CHECK_THAT(found.refused[0], Catch::Contains("damaged"));
  }
  SECTION("empty file") {
    truncate_file(newest, 0.0);
    CHECK(io::find_latest_checkpoint(dir.str(), identity()).state.integers.at(io::kStepsTakenKey) ==
          10);
  }
  SECTION("none left") {
    truncate_file(newest, 0.3);
    truncate_file(dir.str() + "/checkpoint-000000000010.h5", 0.3);
    io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), identity());
    CHECK(found.path.empty());
    CHECK(found.refused.size() == 2);
  }
}

TEST_CASE("a checkpoint of another model, dataset or global batch is refused by name",
          "[checkpoint]") {
  TempDir dir("ckpt");
  const std::string older = io::write_checkpoint(dir.str(), make_state(5), 0);
  const std::string path = io::write_checkpoint(dir.str(), make_state(6), 0);
  io::CheckpointIdentity other = identity();
  std::string expected_word;
  SECTION("model") {
    other.model = "resnet50 width 64";
    expected_word = "another model";
  }
  SECTION("dataset") {
    other.dataset = "manifest ffff0000";
    expected_word = "another dataset";
  }
  SECTION("sample count") {
    other.train_samples = 999;
    expected_word = "another dataset";
  }
  SECTION("global batch") {
    other.global_batch = 96;
    expected_word = "another global batch";
  }
  const std::string why = error_of([&] { io::load_checkpoint(path, other); });
  CHECK_THAT(why, Catch::Contains(expected_word));
  CHECK_THAT(why, Catch::Contains(path));
  // Both are foreign: none is used, each is named.
  io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), other);
  CHECK(found.path.empty());
  REQUIRE(found.refused.size() == 2);
  CHECK_THAT(found.refused[1], Catch::Contains(older));
  CHECK(io::checkpoint_mismatch(make_state(1), identity()).empty());
}

TEST_CASE("keep-checkpoints prunes to the newest N", "[checkpoint]") {
  TempDir dir("ckpt");
  for (int64_t s = 1; s <= 5; ++s) io::write_checkpoint(dir.str(), make_state(s * 100), 2);
  const auto left = io::list_checkpoints(dir.str());
  REQUIRE(left.size() == 2);
  CHECK(fs::path(left[0]).filename() == "checkpoint-000000000500.h5");
  CHECK(fs::path(left[1]).filename() == "checkpoint-000000000400.h5");
  // A leftover temporary file of a killed writer is not a checkpoint and is cleaned up.
  std::ofstream(dir.str() + "/checkpoint-000000000600.h5.tmp-1") << "partial";
  CHECK(io::list_checkpoints(dir.str()).size() == 2);
  io::write_checkpoint(dir.str(), make_state(700), 0);
  CHECK(!fs::exists(dir.str() + "/checkpoint-000000000600.h5.tmp-1"));
  CHECK(io::list_checkpoints(dir.str()).size() == 3);
}

TEST_CASE("an unwritable checkpoint directory is a clear error", "[checkpoint]") {
  TempDir dir("ckpt");
  // A path under a regular file cannot be a directory, whoever runs the test (root too).
  const std::string file = dir.str() + "/plain-file";
  std::ofstream(file) << "x";
  std::string why = error_of([&] { io::check_checkpoint_dir(file); });
  CHECK_THAT(why, Catch::Contains("not a directory"));
  why = error_of([&] { io::check_checkpoint_dir(file + "/sub"); });
  CHECK_THAT(why, Catch::Contains("cannot create the checkpoint directory"));
  CHECK_THAT(why, Catch::Contains(file + "/sub"));
  why = error_of([&] { io::write_checkpoint(file + "/sub", make_state(1), 0); });
  CHECK_THAT(why, Catch::Contains("cannot write checkpoint"));
  if (::geteuid() != 0) {  // permissions bind only non-root users
    const std::string ro = dir.str() + "/read-only";
    fs::create_directory(ro);
    ::chmod(ro.c_str(), 0555);
    why = error_of([&] { io::check_checkpoint_dir(ro); });
    CHECK_THAT(why, Catch::Contains("not writable"));
  }
  // A fresh directory is created and passes.
  CHECK_NOTHROW(io::check_checkpoint_dir(dir.str() + "/new"));
  CHECK(fs::is_directory(dir.str() + "/new"));
}

// Run by checkpoint_full_disk_test.sh with NOSTRUM_FULL_DIR on a 1 MiB tmpfs and
// NOSTRUM_READONLY_DIR on a read-only one (needs mount rights: the script reports 77 = skipped).
TEST_CASE("a full or read-only checkpoint file system is a clear error", "[.][full-disk]") {
  const char* full = std::getenv("NOSTRUM_FULL_DIR");
  const char* ro = std::getenv("NOSTRUM_READONLY_DIR");
  REQUIRE(full != nullptr);
  REQUIRE(ro != nullptr);
  // Start-up check passes on the empty tmpfs; one small checkpoint fits, a big one does not.
  CHECK_NOTHROW(io::check_checkpoint_dir(full));
  const std::string small = io::write_checkpoint(full, make_state(1, 1000), 0);
  const std::string why = error_of([&] { io::write_checkpoint(full, make_state(2, 1 << 20), 0); });
  CHECK_THAT(why, Catch::Contains("cannot write checkpoint"));
  CHECK_THAT(why, Catch::Contains("checkpoint-000000000002.h5"));
  CHECK_THAT(why, Catch::Contains("No space left on device"));
  // No HDF5 object is left open (one left open crashes HDF5's exit handler).
  {
    std::lock_guard<std::mutex> lock(io::hdf5_mutex());
    CHECK(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0);
  }
  // The earlier checkpoint is intact and nothing partial is left.
  CHECK(io::find_latest_checkpoint(full, identity()).path == small);
  CHECK(io::list_checkpoints(full).size() == 1);
  CHECK(std::distance(fs::directory_iterator(full), fs::directory_iterator()) == 1);
  // Filled up by something else: the start-up check says so.
  {
    std::ofstream filler(std::string(full) + "/filler", std::ios::binary);
    std::vector<char> block(64 * 1024, 'x');
    while (filler.write(block.data(), block.size())) {
    }
  }
  const std::string start = error_of([&] { io::check_checkpoint_dir(full); });
  CHECK_THAT(start, Catch::Contains("cannot write to the checkpoint directory"));
  CHECK_THAT(start, Catch::Contains("no space left", Catch::CaseSensitive::No));
  const std::string read_only = error_of([&] { io::check_checkpoint_dir(ro); });
  CHECK_THAT(read_only, Catch::Contains("not writable"));
  CHECK_THAT(read_only, Catch::Contains("Read-only file system"));
}

namespace {

// Whether dir holds a temporary checkpoint file of process `writer` (<name>.tmp-<pid>).
bool has_temporary_file(const fs::path& dir, pid_t writer) {
  const std::string marker = ".tmp-" + std::to_string(writer);
  std::error_code ec;  // the writer renames and removes files meanwhile
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() >= marker.size() &&
        name.compare(name.size() - marker.size(), marker.size(), marker) == 0)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("20 kills of a checkpoint writer never leave the directory without a good checkpoint",
          "[checkpoint][kill]") {
  TempDir dir("ckpt-kill");
  io::write_checkpoint(dir.str(), make_state(1, 1 << 18), 0);  // the run's first checkpoint
  std::mt19937 random(12345);
  int64_t newest = 1;
  int killed_mid_write = 0;
  for (int kill = 0; kill < 20; ++kill) {
    const int64_t first_step = newest + 1;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The writer: checkpoints of ~2 MB in a loop, keeping the newest 2, until killed.
      try {
        for (int64_t s = first_step;; ++s)
          io::write_checkpoint(dir.str(), make_state(s, 1 << 18), 2);
      } catch (...) {
        ::_exit(3);
      }
    }
    // Kill it in the middle of a write (even kills), or a random 0-3 ms after its temporary file
    // was seen (odd kills: other points of the write, or just after it). An even kill is certain
    // to land mid-write on a machine of any speed: the writer is stopped (SIGSTOP) once its
    // temporary file is seen, and killed only if the file is still there while it is stopped,
    // else continued until the next write. 60 s without that is a writer that hangs or writes in
    // place.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool writing = false;
    for (;;) {
      while (!(writing = has_temporary_file(dir.path(), child)) &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
      if (!writing || kill % 2 == 1) break;
      ::kill(child, SIGSTOP);
      int stopped = 0;
      ::waitpid(child, &stopped, WUNTRACED);
      if ((writing = has_temporary_file(dir.path(), child))) break;  // stopped mid-write
      ::kill(child, SIGCONT);
      if (std::chrono::steady_clock::now() >= deadline) break;
    }
    if (kill % 2 == 1)
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(random)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    INFO("kill " << kill);
    REQUIRE(writing);  // else no temporary file appeared in 60 s
    REQUIRE(WIFSIGNALED(status));
    killed_mid_write += has_temporary_file(dir.path(), child);
    io::FoundCheckpoint found = io::find_latest_checkpoint(dir.str(), identity());
    REQUIRE(!found.path.empty());
    CHECK(found.refused.empty());  // a kill never leaves a damaged file under a checkpoint name
    CHECK(found.state.integers.at(io::kStepsTakenKey) >= newest);
    CHECK(found.state.model[0].values[0] ==
          static_cast<float>(found.state.integers.at(io::kStepsTakenKey)));
    newest = found.state.integers.at(io::kStepsTakenKey);
  }
  // The kills did land inside writes (a temporary file was left behind): every even one.
  CHECK(killed_mid_write >= 10);
}
