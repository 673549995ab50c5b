// Trainer: one rank's data-parallel training run to a target accuracy. It owns every piece of
// training state (model and its arenas, optimizer state, schedule position, loaders, gradient
// allreducer) and runs the MLPerf-timed loop: epochs of (data, forward, loss, backward overlapped
// with bucketed allreduce, optimizer step), distributed evaluation, :::MLLOG lines, progress output
// and the result summary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpi/communicator.hpp"
#include "train_options.hpp"

namespace nostrum::train {

// Time of a run split the way the result JSON reports it (seconds, summed over the run, rank 0).
struct TimeSplit {
  double compute = 0.0;            // forward + loss + backward + optimizer, less exposed allreduce
  double exposed_allreduce = 0.0;  // the main thread waited for gradient allreduce
  double hidden_allreduce = 0.0;   // allreduce time that ran behind backward
  double data_wait = 0.0;          // the main thread waited for the loader
  double evaluation = 0.0;         // distributed evaluation, all of it
};

struct EvalPoint {
  int epoch = 0;
  double accuracy = 0.0;
  double seconds_since_run_start = 0.0;
};

struct RunResult {
  std::string status;            // "success" | "aborted"
  double time_to_solution = 0.0; // run_stop - run_start, seconds
  int epochs = 0;                // epochs trained
  double final_accuracy = 0.0;
  double images_per_second = 0.0;  // training images (all ranks) per second of training loop
  std::vector<EvalPoint> evals;
  TimeSplit time;
  int64_t global_batch = 0;
  int ranks = 1, threads = 1;
  uint64_t weights_checksum = 0;
};

// Runs everything options ask for on this rank (collective over world). Throws nostrum errors.
RunResult run_training(const TrainOptions& options, const mpi::Communicator& world);

// The result as one JSON object (what --result-json writes).
std::string result_json(const RunResult& result, const TrainOptions& options);

}  // namespace nostrum::train
