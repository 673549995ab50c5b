// RunState: where a run is (epoch, step, steps taken = schedule position, images, seed, time
// split, evaluation history, status), and the one field table of its scalars, for_each_field:
// capture and restore of a checkpoint (and so its HDF5 layout and checksum, which walk what
// capture gives them) and the result JSON all walk it, so a new counter is added in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::train {

enum class RunStatus {
  kRunning,       // the run has not ended
  kSuccess,       // an evaluation reached the target accuracy
  kAborted,       // the epoch (or --max-steps) budget ran out first
  kEvaluated,     // --eval-only: one evaluation, no training
  kCheckpointed,  // stopped by SIGTERM/SIGUSR1 after writing a checkpoint: resume it
};
// "running", "success", "aborted", "evaluated", "checkpointed": enum order (the result JSON's and
// the MLPerf run_stop status).
const std::vector<std::string>& run_status_names();
const char* to_string(RunStatus status);

// Seconds of the training loop split by what the main thread did: compute, exposed allreduce and
// data wait add up to RunState::train_seconds (compute is the rest of each step); hidden
// allreduce ran behind backward and evaluation is outside the loop.
struct TimeSplit {
  double compute = 0.0;            // forward + loss + backward + optimizer, less exposed allreduce
  double exposed_allreduce = 0.0;  // the main thread waited for the gradient allreduce
  double hidden_allreduce = 0.0;   // allreduce time that ran behind backward (not in the sum)
  double data_wait = 0.0;          // the main thread waited for the loader
  double evaluation = 0.0;         // distributed evaluation, all of it
};

struct EvalPoint {
  int epoch = 0;
  double accuracy = 0.0;
  double seconds_since_run_start = 0.0;
};

// Where the run is. Every counter is the same on every rank.
struct RunState {
  int epoch = 1;               // the epoch being trained (1-based); after the loop, the last one
  int64_t step_in_epoch = 0;   // steps done in this epoch = batches the loader handed out
  int64_t steps_taken = 0;     // steps done in the run = the LR schedule's position
  int64_t images_trained = 0;  // training images over all ranks
  uint64_t seed = 1;           // keys weights, sampling and augmentation (with the epoch)
  double train_seconds = 0.0;  // training loop time: the sum of every step's wall time
  TimeSplit time;
  std::vector<EvalPoint> evals;            // a checkpoint and the result keep them as a list
  RunStatus status = RunStatus::kRunning;  // the result's; a checkpoint is always of a running run
};

// What a checkpoint records besides RunState: the run that wrote it.
struct CheckpointMark {
  int64_t ranks = 0;           // rank count (the layout of the per-rank BN statistics)
  double seconds_spent = 0.0;  // time-to-solution so far
  int64_t mllog_bytes = 0;     // the MLPerf log's size: a resumed run keeps that much and appends
};

// One scalar of the table: its name in a checkpoint (/run/integers/<name> or /run/reals/<name>)
// and its key in the result JSON ("a.b": key b of object a), or nullptr when it is not there.
struct StateField {
  const char* name;
  const char* result_key;
};

// Calls visit(StateField, value&) for every scalar of a RunState (const or not), in table order.
// Values are int, int64_t, uint64_t or double.
template <typename State, typename Visit>
void for_each_field(State& s, Visit&& visit) {
  visit(StateField{"epoch", nullptr}, s.epoch);
  visit(StateField{"step_in_epoch", nullptr}, s.step_in_epoch);
  visit(StateField{"steps_taken", "steps"}, s.steps_taken);
  visit(StateField{"images_trained", nullptr}, s.images_trained);
  visit(StateField{"seed", "seed"}, s.seed);
  visit(StateField{"train_seconds", nullptr}, s.train_seconds);
  visit(StateField{"time_compute", "time_split_s.compute"}, s.time.compute);
  visit(StateField{"time_exposed_allreduce", "time_split_s.exposed_allreduce"},
        s.time.exposed_allreduce);
  visit(StateField{"time_hidden_allreduce", "time_split_s.hidden_allreduce"},
        s.time.hidden_allreduce);
  visit(StateField{"time_data_wait", "time_split_s.data_wait"}, s.time.data_wait);
  visit(StateField{"time_evaluation", "time_split_s.evaluation"}, s.time.evaluation);
}

// The same for a CheckpointMark (checkpoint only).
template <typename Mark, typename Visit>
void for_each_mark_field(Mark& m, Visit&& visit) {
  visit(StateField{"ranks", nullptr}, m.ranks);
  visit(StateField{"seconds_spent", nullptr}, m.seconds_spent);
  visit(StateField{"mllog_bytes", nullptr}, m.mllog_bytes);
}

}  // namespace nostrum::train
