// Run: one rank's training run as one object: its resolved configuration (run_config.hpp), what
// set-up derived from it (RunPlan), where it is (RunState, run_state.hpp: what a checkpoint
// serialises beside the model's and the optimizer's arenas), and the parts that setup_run builds
// (loaders, model, optimizer, schedule, allreducer) and that train_step and evaluate use.
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
#include "run_state.hpp"

namespace nostrum::train {

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
  bool resumed = false;  // restored from a checkpoint (--debug-hold-at-step holds only fresh runs)

  bool rank0() const { return world.rank() == 0; }
};

}  // namespace nostrum::train
