// Run: one rank's training run as one object. RunState is where the run is (epoch, step, steps
// taken = schedule position, loader position, seed, time split, evaluation history): plain data,
// what a checkpoint serialises beside the model's and the optimizer's arenas. Run adds the parts
// that setup_run builds from the options (loaders, model, optimizer, schedule, allreducer) and
// that train_step and evaluate use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/dataset.hpp"
#include "io/loader.hpp"
#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/mpi_reducer.hpp"
#include "mpi/stall_watchdog.hpp"
#include "nostrum/model/model.hpp"
#include "nostrum/optim/lr_schedule.hpp"
#include "nostrum/optim/optimizer.hpp"
#include "run_config.hpp"

namespace nostrum::train {

enum class RunStatus {
  kRunning,       // the run has not ended
  kSuccess,       // an evaluation reached the target accuracy
  kAborted,       // the epoch (or --max-steps) budget ran out first
  kEvaluated,     // --eval-only: one evaluation, no training
  kCheckpointed,  // stopped by SIGTERM/SIGUSR1 after writing a checkpoint: resume it
};
const char* to_string(RunStatus status);  // "running", "success", "aborted", "evaluated"

// Seconds of the training loop split by what the main thread did; the four parts add up to
// RunState::train_seconds (compute is the rest of each step). Evaluation is outside the loop.
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
  std::vector<EvalPoint> evals;
  RunStatus status = RunStatus::kRunning;
};

// Derived once by setup_run; fixed for the run.
struct RunPlan {
  int ranks = 1;
  int threads = 1;     // OpenMP threads per rank
  int rank_cores = 1;  // cores this rank may run on
  int height = 0, width = 0, channels = 0, num_classes = 0;
  int64_t global_batch = 0;
  int64_t steps_per_epoch = 0;
  int64_t train_samples = 0;  // the training split's size (MLPerf's train_samples)
  int64_t eval_samples = 0;
  double base_lr = 0.0;
  float grad_scale = 1.0f;  // 1 / global batch: the loss gradient's scale, so allreduce is a sum
  uint64_t initial_checksum = 0;  // of the broadcast initial weights
};

struct Run {
  Run(RunConfig config, const mpi::Communicator& world) : config(std::move(config)), world(world) {}

  const RunConfig config;
  const mpi::Communicator& world;
  RunPlan plan;
  RunState state;

  std::unique_ptr<io::Loader> train_loader;  // null with --eval-only
  std::unique_ptr<io::Loader> eval_loader;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<mpi::MpiReducer> bn_reducer;          // --sync-bn over > 1 rank
  std::unique_ptr<optim::Optimizer> optimizer;          // null with --eval-only
  std::unique_ptr<optim::LrSchedule> schedule;          // null with --eval-only
  std::unique_ptr<mpi::GradientAllreducer> allreducer;  // null for 1 rank
  std::vector<std::string> notes;  // what set-up decided, in words, for the progress output
  // Failures and preemption (checkpointing.hpp): the stall watchdog (null: off), and rank 0's
  // monotonic time at which a timed checkpoint (--checkpoint-every Nm) is due (0: none).
  std::unique_ptr<mpi::StallWatchdog> watchdog;
  double timed_checkpoint_due_s = 0.0;

  bool rank0() const { return world.rank() == 0; }
};

}  // namespace nostrum::train
