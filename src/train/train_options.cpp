// nostrum-train's options: grouped --help, INI config files, validation with the valid choices.
#include "train_options.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/precision_choice.hpp"
#include "nostrum/model/architecture.hpp"

namespace po = boost::program_options;

namespace nostrum::train {

namespace {

// A double default as --help shows it: "0.91", not Boost's 17 digits ("0.91000000000000003").
std::string shown(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A text option with a fixed set of values (not an enum: the model, the MLPerf status).
void require_choice(const std::string& option, const std::string& value,
                    const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) == choices.end())
    throw OptionError("invalid value '" + value + "'", "--" + option,
                      "valid choices: " + join_names(choices));
}

template <typename T>
void require(bool ok, const std::string& option, const T& value, const std::string& rule) {
  if (ok) return;
  std::ostringstream text;
  text << "invalid value '" << value << "'";
  throw OptionError(text.str(), "--" + option, rule);
}

// Enum-valued options are read as text and parsed after notify (with the valid choices).
struct EnumText {
  std::string optimizer, lr_schedule, overlap, precision;
  bool no_overlap = false;
};

// The environment variables nostrum-train reads itself, after the options in --help.
constexpr const char* kEnvironmentHelp =
    "Environment:\n"
    "  NOSTRUM_MAX_ISA=avx2|avx512|avx512_bf16|amx\n"
    "                        run no kernel above this instruction-set level: nostrum's,\n"
    "                        OpenBLAS's core, oneDNN's (DNNL_MAX_CPU_ISA unless set)\n"
    "  OPENBLAS_CORETYPE     OpenBLAS's kernel set, kept as given (else nostrum may\n"
    "                        re-exec itself with one; NOSTRUM_KEEP_BLAS_KERNELS=1: never)\n";

// One options group each, one option per line (the table --help prints).
po::options_description data_options(TrainOptions& o) {
  po::options_description data("Data");
  // clang-format off
  data.add_options()
    ("data", po::value(&o.data_dir)->required(), "dataset directory made by nostrum-shards")
    ("loader-threads", po::value(&o.loader_threads)->default_value(o.loader_threads),
     "background threads per rank that read, decode and augment")
    ("random-flip", po::value(&o.random_flip)->default_value(o.random_flip),
     "random horizontal flip in training")
    ("pad-crop", po::value(&o.pad_crop)->default_value(o.pad_crop),
     "raw images: random crop after padding by this many pixels (0 = off; refused for JPEG data)");
  // clang-format on
  return data;
}

po::options_description model_options(TrainOptions& o, EnumText& text) {
  po::options_description model("Model");
  // clang-format off
  model.add_options()
    ("model", po::value(&o.model)->default_value(o.model),
     "resnet8/14/20/32/44/56/110 (CIFAR-style) | resnet18/34/50/101/152 (torchvision v1.5)")
    ("width", po::value(&o.width)->default_value(o.width),
     "first-stage width (0 = the model's default: 16 CIFAR-style, 64 ImageNet)")
    ("zero-init-residual", po::bool_switch(&o.zero_init_residual),
     "zero-initialise the last BN gamma of every residual block")
    ("init-weights", po::value(&o.init_weights), "start from this HDF5 weights file")
    ("precision", po::value(&text.precision)->default_value(text.precision),
     "fp32 | bf16 | auto: bf16 operands, fp32 sums in the convs and classifier (needs x86-64 "
     "AVX512_BF16); auto: bf16 where rank 0's bf16 register probe is >= 1.3x its fp32 one")
    ("conv-kernel", po::value(&o.conv_kernel)->default_value(o.conv_kernel),
     ("each conv pass's kernel. measure: rank 0 times every candidate that can run each layer "
      "shape and pass (median of 3 calls) at the run's batch, threads and precision, every rank "
      "takes the fastest; cached: the cache's choice where it has one, measure the rest; fixed: "
      "the built-in rule (direct kernels up to 128 channels, else GEMMs); NAME: that candidate "
      "wherever it fits, the fixed rule where it does not (said at start-up; a NAME this CPU or "
      "precision cannot run is refused). Candidates:\n" + kernels::conv_kernel_help()).c_str())
    ("conv-cache", po::value(&o.conv_cache),
     "the conv kernel cache file (default $XDG_CACHE_HOME/nostrum/conv-kernels-<cpu>.json, "
     "$HOME/.cache without XDG_CACHE_HOME; none: no cache)")
    ("save-weights", po::value(&o.save_weights), "write the final weights to this HDF5 file");
  // clang-format on
  return model;
}

po::options_description optimisation_options(TrainOptions& o, EnumText& text) {
  po::options_description optim("Optimisation");
  // clang-format off
  optim.add_options()
    ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "images per rank and step")
    ("epochs", po::value(&o.epochs)->default_value(o.epochs), "epoch budget (run aborts after it)")
    ("max-steps", po::value(&o.max_steps)->default_value(o.max_steps),
     "stop after this many steps (0 = no limit; for throughput and scaling runs)")
    ("target-accuracy", po::value(&o.target_accuracy)->default_value(o.target_accuracy, shown(o.target_accuracy)),
     "stop with success once top-1 evaluation accuracy reaches this fraction")
    ("optimizer", po::value(&text.optimizer)->default_value(text.optimizer), "sgd | lars")
    ("lr", po::value(&o.lr)->default_value(o.lr, shown(o.lr)), "base learning rate (0 = recipe default)")
    ("end-lr", po::value(&o.end_lr)->default_value(o.end_lr, shown(o.end_lr)), "learning rate at the end of decay")
    ("warmup-epochs", po::value(&o.warmup_epochs)->default_value(o.warmup_epochs, shown(o.warmup_epochs)),
     "linear warmup length in epochs")
    ("lr-schedule", po::value(&text.lr_schedule)->default_value(text.lr_schedule),
     "poly (MLPerf) | cosine | step (x0.1 at 1/3 and 2/3 of the budget) | onecycle | constant")
    ("poly-power", po::value(&o.poly_power)->default_value(o.poly_power, shown(o.poly_power)), "polynomial decay power (only with --lr-schedule poly)")
    ("decay-epochs", po::value(&o.decay_epochs)->default_value(o.decay_epochs, shown(o.decay_epochs)),
     "epochs over which the LR decays (0 = the whole budget)")
    ("momentum", po::value(&o.momentum)->default_value(o.momentum, shown(o.momentum)), "momentum")
    ("nesterov", po::bool_switch(&o.nesterov), "Nesterov momentum (sgd and lars)")
    ("weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay, shown(o.weight_decay)), "weight decay")
    ("decay-bias-and-norm", po::bool_switch()->notifier([&](bool on) { o.exempt_bias_and_norm = !on; }),
     "sgd: apply weight decay to biases and BN parameters too (MLPerf exempts them; lars "
     "always exempts them, as the MLPerf reference does, so the flag changes nothing there)")
    ("label-smoothing", po::value(&o.label_smoothing)->default_value(o.label_smoothing, shown(o.label_smoothing)),
     "label smoothing of the cross-entropy loss")
    ("lars-eta", po::value(&o.lars_eta)->default_value(o.lars_eta, shown(o.lars_eta)), "LARS trust coefficient (only with --optimizer lars)");
  // clang-format on
  return optim;
}

po::options_description evaluation_options(TrainOptions& o) {
  po::options_description eval("Evaluation");
  // clang-format off
  eval.add_options()
    ("eval-every", po::value(&o.eval_every)->default_value(o.eval_every), "evaluate every N epochs")
    ("eval-offset", po::value(&o.eval_offset)->default_value(o.eval_offset),
     "evaluate after epochs K+1, K+1+N, K+1+2N, ... for --eval-offset K and --eval-every N (the "
     "MLPerf MXNet configs' EVAL_OFFSET, epochs counted from 0); -1: after epochs N, 2N, ...")
    ("eval-only", po::bool_switch(&o.eval_only), "evaluate --init-weights and exit");
  // clang-format on
  return eval;
}

po::options_description parallelism_options(TrainOptions& o, EnumText& text) {
  po::options_description parallel("Parallelism");
  // clang-format off
  parallel.add_options()
    ("threads", po::value(&o.threads)->default_value(o.threads),
     "OpenMP threads per rank (0 = the cores this rank may use)")
    ("bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb, shown(o.bucket_mb)), "gradient bucket size, MB")
    ("overlap", po::value(&text.overlap)->default_value(text.overlap),
     "allreduce gradient buckets on a communication thread during backward: on, off, or auto (on "
     "when the rank has a core beyond its OpenMP threads or the gradients fill more than one "
     "bucket; a single bucket is ready only when backward ends)")
    ("no-overlap", po::bool_switch(&text.no_overlap), "the same as --overlap off")
    ("sync-bn", po::bool_switch(&o.sync_bn), "synchronise batch-norm statistics across ranks")
    ("sync-bn-group", po::value(&o.sync_bn_group)->default_value(o.sync_bn_group),
     "ranks per sync-BN group (0 = all ranks; only with --sync-bn)");
  // clang-format on
  return parallel;
}

po::options_description run_options(TrainOptions& o) {
  po::options_description run("Run and output");
  // clang-format off
  run.add_options()
    ("help,h", "print this help")
    ("config", po::value(&o.config_file), "INI file with any of these options (command line wins)")
    ("seed", po::value(&o.seed)->default_value(o.seed), "seed of weights, sampling, augmentation")
    ("mllog", po::value(&o.mllog), "write :::MLLOG lines to this file (rank 0)")
    ("result-json", po::value(&o.result_json), "write the result summary to this JSON file")
    ("trace", po::value(&o.trace), "write a Chrome trace per rank (FILE.json -> FILE.rankN.json)")
    ("quiet", po::bool_switch(&o.quiet), "no progress output")
    ("verbose", po::bool_switch(&o.verbose), "also print the conv kernel table (every shape and pass, each candidate's time, the one chosen)")
    ("checkpoint-dir", po::value(&o.checkpoint_dir),
     "write checkpoints to this directory (checked writable at start-up)")
    ("checkpoint-every", po::value(&o.checkpoint_every)->default_value(o.checkpoint_every),
     "checkpoint every N epochs, or every N minutes with an m suffix (30m); only with "
     "--checkpoint-dir")
    ("keep-checkpoints", po::value(&o.keep_checkpoints)->default_value(o.keep_checkpoints),
     "keep the newest N checkpoints (0 = all; only with --checkpoint-dir)")
    ("resume", po::bool_switch(&o.resume),
     "continue from the newest valid checkpoint in --checkpoint-dir (start afresh if none)")
    ("resume-from", po::value(&o.resume_from), "continue from this checkpoint file")
    ("stall-timeout", po::value(&o.stall_timeout)->default_value(o.stall_timeout, shown(o.stall_timeout)),
     "abort the job when a rank stalls this many seconds in a collective (0 = off)")
    ("debug-inject-nan-at-step", po::value(&o.debug_inject_nan_at_step)->default_value(-1),
     "debug: make rank 0's input NaN at this step (tests the non-finite stop)")
    ("debug-signal-at-step", po::value(&o.debug_signal_at_step)->default_value(-1),
     "debug: the last rank raises SIGUSR1 during this step (tests the stop at a chosen step)")
    ("debug-hold-at-step", po::value(&o.debug_hold_at_step)->default_value(-1),
     "debug: a run that did not resume holds every rank before this step until a rank gets "
     "SIGTERM/SIGUSR1 (tests a signal or kill during training on a machine of any speed)")
    ("debug-hold-at-end", po::bool_switch(&o.debug_hold_at_end),
     "debug: after the result is written every rank holds until a rank gets SIGTERM/SIGUSR1, "
     "then exits with the run's status (tests a job cancelled as its ranks finish)")
    ("progress-seconds", po::value(&o.progress_seconds)->default_value(o.progress_seconds, shown(o.progress_seconds)),
     "progress line interval inside an epoch")
    ("submission-org", po::value(&o.submission_org)->default_value(o.submission_org), "MLPerf org")
    ("submission-platform", po::value(&o.submission_platform)->default_value(o.submission_platform),
     "MLPerf platform")
    ("submission-status", po::value(&o.submission_status)->default_value(o.submission_status),
     "MLPerf status: onprem | cloud | preview | research");
  // clang-format on
  return run;
}

// The enum options from their text, and every rule on a value by itself (OptionError naming the
// option). How options combine is resolve's (resolve.cpp).
void validate(TrainOptions& o, const EnumText& text) {
  require_choice("model", o.model, model::model_names());
  o.optimizer = optim::parse_optimizer_kind(text.optimizer);
  o.overlap = parse_enum_name<OverlapPolicy>(text.overlap, overlap_policy_names(), "--overlap");
  if (text.no_overlap) o.overlap = OverlapPolicy::kOff;
  o.precision_auto = text.precision == "auto";
  if (!o.precision_auto)
    o.precision = kernels::precision_from_option(text.precision, "--precision", nullptr);
  o.lr_schedule = optim::parse_schedule_kind(text.lr_schedule);
  o.conv_kernels = kernels::conv_kernel_request(o.conv_kernel, o.conv_cache, "--conv-kernel");
  require_choice("submission-status", o.submission_status,
                 {"onprem", "cloud", "preview", "research"});
  require(o.batch_size > 0, "batch-size", o.batch_size, "must be positive");
  require(o.epochs > 0, "epochs", o.epochs, "must be positive");
  require(o.max_steps >= 0, "max-steps", o.max_steps, "must be >= 0");
  require(o.target_accuracy > 0 && o.target_accuracy <= 1, "target-accuracy", o.target_accuracy,
          "a fraction in (0, 1]");
  require(o.lr >= 0, "lr", o.lr, "must be >= 0");
  require(o.end_lr >= 0, "end-lr", o.end_lr, "must be >= 0");
  require(o.warmup_epochs >= 0 && o.warmup_epochs < o.epochs, "warmup-epochs", o.warmup_epochs,
          "must be in [0, epochs)");
  require(o.momentum >= 0 && o.momentum < 1, "momentum", o.momentum, "must be in [0, 1)");
  require(o.weight_decay >= 0, "weight-decay", o.weight_decay, "must be >= 0");
  require(o.label_smoothing >= 0 && o.label_smoothing < 1, "label-smoothing", o.label_smoothing,
          "must be in [0, 1)");
  require(o.eval_every > 0, "eval-every", o.eval_every, "must be positive");
  require(o.eval_offset >= -1, "eval-offset", o.eval_offset, "must be >= -1");
  require(o.threads >= 0, "threads", o.threads, "must be >= 0");
  require(o.loader_threads > 0, "loader-threads", o.loader_threads, "must be positive");
  require(o.bucket_mb > 0, "bucket-mb", o.bucket_mb, "must be positive");
  require(o.width >= 0, "width", o.width, "must be >= 0");
  require(o.pad_crop >= 0, "pad-crop", o.pad_crop, "must be >= 0");
  require(o.sync_bn_group >= 0, "sync-bn-group", o.sync_bn_group, "must be >= 0");
  require(o.keep_checkpoints >= 0, "keep-checkpoints", o.keep_checkpoints, "must be >= 0");
  require(o.stall_timeout >= 0, "stall-timeout", o.stall_timeout, "seconds, >= 0 (0 = off)");
}

}  // namespace

bool parse_train_options(int argc, char** argv, TrainOptions& o) {
  EnumText text{optim::to_string(o.optimizer), optim::to_string(o.lr_schedule),
                overlap_policy_names()[static_cast<size_t>(o.overlap)],
                kernels::precision_name(o.precision)};
  po::options_description all(
      "nostrum-train: data-parallel training to a target accuracy\n"
      "usage: [mpirun -n P] nostrum-train --data DIR [options]\n"
      "--nesterov works with both optimizers; --pad-crop is refused on JPEG data.\n"
      "Options (one marked 'only with X' is refused without X, naming both); each one explained,\n"
      "with the output, exit statuses and checkpoints: src/train/README.md in nostrum's sources");
  all.add(data_options(o)).add(model_options(o, text)).add(optimisation_options(o, text));
  all.add(evaluation_options(o)).add(parallelism_options(o, text)).add(run_options(o));
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    if (vm.count("help")) {
      std::cout << all << "\n" << kEnvironmentHelp;
      return false;
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::ifstream file(path);
      if (!file) throw OptionError("cannot open config file", path, "check --config");
      po::store(po::parse_config_file(file, all, /*allow_unregistered=*/false), vm);
      std::ifstream again(path);
      o.options_text +=
          "config " + path + ":\n" + std::string(std::istreambuf_iterator<char>(again), {}) + "\n";
    }
    std::string line = "command line:";
    for (int i = 1; i < argc; ++i) line += std::string(" ") + argv[i];
    o.options_text = line + "\n" + o.options_text;
    po::notify(vm);
    for (const auto& [name, value] : vm)
      if (!value.defaulted()) o.given.insert(name);
  } catch (const po::error& e) {
    throw OptionError(e.what(), "command line or config", "run nostrum-train --help");
  }

  validate(o, text);
  return true;
}

}  // namespace nostrum::train
