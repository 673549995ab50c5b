// TrainOptions: every setting of nostrum-train, parsed from the command line and an optional INI
// config file (--config; the command line wins) with Boost.Program_options, each value checked on
// its own. resolve (resolve.hpp) turns them into the run's typed configuration and checks how they
// combine; only it and main.cpp read TrainOptions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/kernels/precision.hpp"
#include "nostrum/optim/lr_schedule.hpp"
#include "nostrum/optim/optimizer.hpp"
#include "run_config.hpp"

namespace nostrum::train {

struct TrainOptions {
  // data
  std::string data_dir;
  int loader_threads = 2;
  bool random_flip = true;
  int pad_crop = 4;  // raw images: pad by this many pixels and crop back (0 = off)
  // model
  std::string model = "resnet8";
  int width = 0;  // first-stage width; 0 = the model's default (16 CIFAR, 64 ImageNet)
  bool zero_init_residual = false;
  std::string init_weights;  // HDF5 weights file (/model/<state_dict key>)
  kernels::Precision precision = kernels::Precision::kFp32;  // of the convs and the classifier
  bool precision_auto = false;  // --precision auto: chosen by the probes at set-up (setup.cpp)
  // --conv-kernel, --conv-cache: each conv pass's kernel (kernels/conv_selection.hpp)
  std::string conv_kernel = "cached";
  std::string conv_cache;  // "" = the default ($XDG_CACHE_HOME/nostrum/...), "none" = no cache
  kernels::ConvKernelRequest conv_kernels;  // both, parsed (a default request: the fixed rule)
  // optimisation
  int batch_size = 128;   // per rank
  int epochs = 5;         // budget: the run stops (aborted) after this many
  int64_t max_steps = 0;  // > 0: stop (aborted) after this many steps (throughput runs)
  double target_accuracy = 0.91;
  optim::OptimizerKind optimizer = optim::OptimizerKind::kSgd;
  double lr = 0.0;  // 0 = the recipe's default for the optimizer and global batch
  double end_lr = 0.0001;
  double warmup_epochs = 0.0;
  optim::ScheduleKind lr_schedule = optim::ScheduleKind::kPolynomial;
  double poly_power = 2.0;
  double decay_epochs = 0.0;  // 0 = decay over the whole epoch budget
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0001;
  bool exempt_bias_and_norm = true;
  double label_smoothing = 0.1;
  double lars_eta = 0.001;
  // evaluation
  int eval_every = 1;
  // Evaluations after epochs eval_offset + 1, + eval_every, ... (MLPerf MXNet's EVAL_OFFSET, epochs
  // counted from 0); -1: after epochs eval_every, 2 eval_every, ...
  int eval_offset = -1;
  bool eval_only = false;
  // parallelism
  int threads = 0;  // OpenMP threads per rank; 0 = cores available to the rank
  double bucket_mb = 25.0;
  OverlapPolicy overlap = OverlapPolicy::kAuto;
  bool sync_bn = false;
  int sync_bn_group = 0;  // ranks per sync-BN group; 0 = all
  // run and output
  uint64_t seed = 1;
  std::string mllog;
  std::string result_json;
  std::string save_weights;
  std::string trace;
  bool quiet = false;
  bool verbose = false;  // also the conv kernel table
  double progress_seconds = 10.0;
  std::string submission_org = "nostrum";
  std::string submission_platform = "cpu";
  std::string submission_status = "onprem";
  std::string config_file;
  // checkpoints, preemption, failures (src/train/checkpointing.hpp)
  std::string checkpoint_dir;             // where checkpoints go; empty: none
  std::string checkpoint_every = "1";     // "N" epochs, or "Nm" minutes (e.g. "30m")
  int keep_checkpoints = 3;               // newest N kept; 0 = all
  bool resume = false;                    // from the newest valid checkpoint in checkpoint_dir
  std::string resume_from;                // from this checkpoint file
  double stall_timeout = 600.0;           // seconds; 0 = no stall watchdog
  int64_t debug_inject_nan_at_step = -1;  // >= 0: rank 0's input becomes NaN at this step
  int64_t debug_signal_at_step = -1;      // >= 0: the last rank raises SIGUSR1 during this step
  int64_t debug_hold_at_step = -1;        // >= 0: a fresh run holds here until a stop signal
  bool debug_hold_at_end = false;         // the ended run holds until a stop signal, then exits
  std::string options_text;               // the command line and config file, for the checkpoint
  std::set<std::string> given;            // the options the user set (command line or config)
};

// Parses and validates; throws OptionError naming the option (and the valid choices) on bad input.
// Returns false (after printing help to stdout) when --help was given.
bool parse_train_options(int argc, char** argv, TrainOptions& options);

}  // namespace nostrum::train
