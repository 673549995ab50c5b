// RunConfig: what a run was asked to do, one typed configuration per part (data, model, training
// budget, optimizer, schedule, evaluation, checkpointing, parallelism, logging). resolve
// (resolve.hpp) builds it once from the parsed options on every rank; everything else in src/train
// reads these and never the options. Every value is final: defaults applied, combinations checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/model/architecture.hpp"
#include "nostrum/optim/lr_schedule.hpp"
#include "nostrum/optim/optimizer.hpp"

namespace nostrum::train {

// --overlap: allreduce gradient buckets on a communication thread during backward: always, never,
// or (auto) when the rank has a core beyond its OpenMP threads or there is more than one bucket.
enum class OverlapPolicy { kAuto, kOn, kOff };
const std::vector<std::string>& overlap_policy_names();  // "auto", "on", "off": enum order

struct DataConfig {
  std::string dir;        // made by nostrum-shards
  io::Manifest manifest;  // dir/manifest.txt, read once
  int batch_size = 128;   // images per rank and step
  int loader_threads = 2;
  bool random_flip = true;
  int pad_crop = 4;  // raw images: pad by this many pixels and crop back (0 = off; JPEG: 0)
};

struct ModelSetup {
  model::ModelConfig config;    // name, classes and channels of the dataset, width, init, precision
  std::string init_weights;     // HDF5 weights file to start from (empty: the seed's init)
  std::string save_weights;     // where the final weights go (empty: nowhere)
  bool precision_auto = false;  // config.precision to be chosen by rank 0's probes (setup_run)
  kernels::ConvKernelRequest conv_kernels;  // how each conv pass's kernel is chosen (setup_run)
};

// The budget and the goal.
struct TrainingConfig {
  uint64_t seed = 1;      // keys weights, sampling and augmentation
  int epochs = 5;         // the run stops (aborted) after this many
  int64_t max_steps = 0;  // > 0: stop (aborted) after this many steps
  double target_accuracy = 0.91;
  double label_smoothing = 0.1;
  int64_t debug_inject_nan_at_step = -1;  // >= 0: rank 0's input becomes NaN at this step
  int64_t debug_signal_at_step = -1;      // >= 0: the last rank raises SIGUSR1 during this step
  int64_t debug_hold_at_step = -1;        // >= 0: a fresh run holds here until a stop signal
};

struct OptimizerConfig {
  optim::OptimizerKind kind = optim::OptimizerKind::kSgd;
  double lr = 0.0;  // base rate; 0 = the recipe's default for the optimizer and global batch
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0001;
  // What the optimizer does, not what was asked: LARS exempts BN and bias parameters always.
  bool exempt_bias_and_norm = true;
  double lars_eta = 0.001;  // LARS only
};

struct ScheduleConfig {
  optim::ScheduleKind kind = optim::ScheduleKind::kPolynomial;
  double end_lr = 0.0001;
  double warmup_epochs = 0.0;
  double poly_power = 2.0;    // poly only
  double decay_epochs = 0.0;  // epochs over which the LR decays (the budget when not given)
};

struct EvaluationConfig {
  int every = 1;
  int offset = -1;     // MLPerf MXNet's EVAL_OFFSET; -1: after every, 2 every, ...
  int last_epoch = 5;  // the budget's last epoch: always evaluated
  bool only = false;   // --eval-only: evaluate the init weights, no training
  // Whether an evaluation follows epoch `epoch`, the rule the trainer steers by (the MLPerf log's
  // blocks follow it): after epochs offset + 1, offset + 1 + every, ... (1-based; NVIDIA's MXNet
  // fit.py evaluates after the 0-based epoch e with e % period == offset), and after last_epoch.
  bool due_after(int epoch) const {
    const int since_first = epoch - 1 - offset;  // epochs after the first evaluated one
    return (since_first >= 0 && since_first % every == 0) || epoch == last_epoch;
  }
};

struct CheckpointConfig {
  std::string dir;           // empty: no checkpoints
  int every_epochs = 1;      // 0 when timed
  double every_minutes = 0;  // 0 when every N epochs
  int keep = 3;              // newest N kept; 0 = all
  bool resume = false;       // from the newest valid checkpoint in dir
  std::string resume_from;   // from this file
  bool enabled() const { return !dir.empty(); }
  bool resuming() const { return resume || !resume_from.empty(); }
};

struct ParallelConfig {
  int threads = 0;  // OpenMP threads per rank; 0 = the cores available to the rank
  double bucket_mb = 25.0;
  OverlapPolicy overlap = OverlapPolicy::kAuto;
  bool sync_bn = false;
  int sync_bn_group = 0;         // ranks per sync-BN group; 0 = all
  double stall_timeout = 600.0;  // seconds; 0 = no stall watchdog
};

struct LoggingConfig {
  std::string mllog, trace;  // empty: none
  bool quiet = false;
  bool verbose = false;  // the conv kernel table too
  double progress_seconds = 10.0;
  std::string submission_org = "nostrum", submission_platform = "cpu";
  std::string submission_status = "onprem";
  std::string options_text;  // the command line and config file, for the checkpoint
};

struct RunConfig {
  DataConfig data;
  ModelSetup model;
  TrainingConfig training;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  EvaluationConfig evaluation;
  CheckpointConfig checkpoint;
  ParallelConfig parallel;
  LoggingConfig logging;
  std::vector<std::string> notes;  // what resolve decided, in words, for the progress output
};

}  // namespace nostrum::train
