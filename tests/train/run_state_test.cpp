// The run's field table (src/train/run_state.hpp) walked end to end: every field, set to a value
// of its own, comes back from a checkpoint file (capture, HDF5 write and read, saved_run, restore)
// and every field with a result key from the result JSON; a checkpoint that lacks a field is
// refused naming it.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "checkpointing.hpp"
#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"
#include "resolve.hpp"
#include "result.hpp"
#include "setup.hpp"
#include "synthetic_dataset.hpp"

using namespace nostrum;
using train::RunState;
using train::StateField;

namespace {

// A one-rank Run of a tiny synthetic dataset.
std::unique_ptr<train::Run> small_run(const mpi::Communicator& world) {
  train::TrainOptions o;
  o.data_dir = testing::write_synthetic_dataset(testing::process_temp_dir() + "/data",
                                                io::ImageKind::raw, 32, 8, 8);
  o.model = "resnet8";
  o.width = 4;
  o.batch_size = 8;
  o.loader_threads = 1;
  o.threads = 1;
  o.lr = 0.05;
  o.quiet = true;
  o.seed = 0x1234;
  return train::setup_run(train::resolve(o), world);
}

// Every scalar of the table set to a value of its own (the n-th field: n + 1, or n + 0.5).
RunState distinct_state() {
  RunState s;
  int n = 0;
  train::for_each_field(s, [&](const StateField&, auto& value) {
    using T = std::decay_t<decltype(value)>;
    value = std::is_floating_point_v<T> ? static_cast<T>(n + 0.5) : static_cast<T>(n + 1);
    ++n;
  });
  s.evals = {{1, 0.25, 10.5}, {3, 0.5, 30.25}};
  return s;
}

// Every field of a and b, walked together: names of those that differ.
std::vector<std::string> differing_fields(const RunState& a, const RunState& b) {
  std::vector<double> values;
  train::for_each_field(a, [&](const StateField&, const auto& value) {
    values.push_back(static_cast<double>(value));
  });
  std::vector<std::string> differing;
  size_t i = 0;
  train::for_each_field(b, [&](const StateField& f, const auto& value) {
    if (static_cast<double>(value) != values[i++]) differing.push_back(f.name);
  });
  return differing;
}

}  // namespace

TEST_CASE("every field of the run's state comes back from a checkpoint file", "[run-state]") {
  const mpi::Communicator world;
  std::unique_ptr<train::Run> run = small_run(world);
  run->state = distinct_state();
  const train::CheckpointMark mark{1, 77.25, 4096};
  const io::CheckpointState captured =
      train::capture_checkpoint(*run, mark, /*epoch_closed=*/false);
  const std::string path = io::write_checkpoint(testing::process_temp_dir(), captured, 0);
  const io::CheckpointState read = io::read_checkpoint(path);

  const train::SavedRun saved = train::saved_run(read, path);
  CHECK(differing_fields(saved.state, run->state).empty());
  CHECK(saved.mark.ranks == 1);
  CHECK(saved.mark.seconds_spent == 77.25);
  CHECK(saved.mark.mllog_bytes == 4096);
  REQUIRE(saved.state.evals.size() == 2);
  CHECK(saved.state.evals[1].seconds_since_run_start == 30.25);

  const RunState before = run->state;
  run->state = RunState{};
  train::restore_checkpoint(*run, read, path);
  CHECK(differing_fields(run->state, before).empty());

  // A closed epoch is saved as the next one at step 0.
  const io::CheckpointState closed = train::capture_checkpoint(*run, mark, /*epoch_closed=*/true);
  const train::SavedRun next = train::saved_run(closed, path);
  CHECK(next.state.epoch == before.epoch + 1);
  CHECK(next.state.step_in_epoch == 0);
}

TEST_CASE("a checkpoint that lacks a field of the table is refused naming it", "[run-state]") {
  const mpi::Communicator world;
  std::unique_ptr<train::Run> run = small_run(world);
  io::CheckpointState c = train::capture_checkpoint(*run, {1, 0.0, 0}, false);
  c.reals.erase("time_data_wait");
  try {
    train::saved_run(c, "some.h5");
    FAIL("a checkpoint without time_data_wait was accepted");
  } catch (const DataError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/run/reals/time_data_wait"));
    CHECK_THAT(e.what(), Catch::Contains("some.h5"));
  }
}

TEST_CASE("every field with a result key comes back from the result JSON", "[run-state]") {
  train::RunResult r;
  r.state = distinct_state();
  r.state.status = train::RunStatus::kCheckpointed;
  const train::RunResult back = train::parse_result_json(train::result_json(r));
  CHECK(back.state.status == train::RunStatus::kCheckpointed);
  std::vector<std::string> keyed, differing;
  std::vector<double> values;
  train::for_each_field(back.state, [&](const StateField&, const auto& value) {
    values.push_back(static_cast<double>(value));
  });
  size_t i = 0;
  train::for_each_field(r.state, [&](const StateField& f, const auto& value) {
    if (f.result_key && static_cast<double>(value) != values[i]) differing.push_back(f.name);
    if (f.result_key) keyed.push_back(f.result_key);
    ++i;
  });
  CHECK(differing.empty());
  // The keys tools/scaling-study and tools/mlperf read.
  for (const char* key :
       {"steps", "seed", "time_split_s.compute", "time_split_s.exposed_allreduce",
        "time_split_s.hidden_allreduce", "time_split_s.data_wait", "time_split_s.evaluation"})
    CHECK(std::find(keyed.begin(), keyed.end(), std::string(key)) != keyed.end());
}

TEST_CASE("the field tables name every field once", "[run-state]") {
  // A name used twice would make one field overwrite the other in the checkpoint.
  std::vector<std::string> names;
  RunState s;
  train::CheckpointMark m;
  train::for_each_field(s, [&](const StateField& f, const auto&) { names.push_back(f.name); });
  train::for_each_mark_field(m, [&](const StateField& f, const auto&) { names.push_back(f.name); });
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}
