// resolve: TrainOptions -> RunConfig, part by part, each refused combination named.
#include "resolve.hpp"

#include <cstdlib>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::train {

namespace {

bool given(const TrainOptions& o, const char* option) {
  return o.given.count(option) > 0;
}

// OptionError naming both options when `option` was given where it would be ignored.
void refuse_if(bool ignored, const TrainOptions& o, const char* option, const std::string& why,
               const std::string& hint) {
  if (ignored && given(o, option))
    throw OptionError("--" + std::string(option) + " " + why, "--" + std::string(option), hint);
}

DataConfig resolve_data(const TrainOptions& o) {
  DataConfig d;
  d.dir = o.data_dir;
  d.manifest = io::Manifest::read(o.data_dir);
  d.batch_size = o.batch_size;
  d.loader_threads = o.loader_threads;
  d.random_flip = o.random_flip;
  const bool jpeg = d.manifest.kind == io::ImageKind::jpeg;
  refuse_if(jpeg, o, "pad-crop",
            "applies to raw images only; --data " + o.data_dir + " holds JPEG images",
            "drop --pad-crop (JPEG images get a random-resized crop)");
  d.pad_crop = jpeg ? 0 : o.pad_crop;
  return d;
}

ModelSetup resolve_model(const TrainOptions& o, const io::Manifest& manifest) {
  ModelSetup m;
  m.config.name = o.model;
  m.config.num_classes = static_cast<int>(manifest.classes.size());
  m.config.in_channels = manifest.kind == io::ImageKind::raw ? manifest.channels : 3;
  m.config.width = o.width;  // 0: the model's own (16 CIFAR-style, 64 ImageNet)
  m.config.zero_init_residual = o.zero_init_residual;
  m.config.precision = o.precision;
  m.precision_auto = o.precision_auto;
  m.conv_kernels = o.conv_kernels;
  m.init_weights = o.init_weights;
  m.save_weights = o.save_weights;
  return m;
}

TrainingConfig resolve_training(const TrainOptions& o) {
  TrainingConfig t;
  t.seed = o.seed;
  t.epochs = o.epochs;
  t.max_steps = o.max_steps;
  t.target_accuracy = o.target_accuracy;
  t.label_smoothing = o.label_smoothing;
  t.debug_inject_nan_at_step = o.debug_inject_nan_at_step;
  t.debug_signal_at_step = o.debug_signal_at_step;
  t.debug_hold_at_step = o.debug_hold_at_step;
  return t;
}

OptimizerConfig resolve_optimizer(const TrainOptions& o, std::vector<std::string>& notes) {
  const bool lars = o.optimizer == optim::OptimizerKind::kLars;
  refuse_if(!lars, o, "lars-eta", "applies to --optimizer lars only; this run's is sgd",
            "drop --lars-eta or give --optimizer lars");
  OptimizerConfig c;
  c.kind = o.optimizer;
  c.lr = o.lr;
  c.momentum = o.momentum;
  c.nesterov = o.nesterov;
  c.weight_decay = o.weight_decay;
  c.exempt_bias_and_norm = lars || o.exempt_bias_and_norm;
  c.lars_eta = o.lars_eta;
  if (lars && !o.exempt_bias_and_norm)
    notes.push_back(
        "note: --decay-bias-and-norm changes nothing with --optimizer lars: LARS exempts BN and "
        "bias parameters from weight decay always, as the MLPerf reference does");
  return c;
}

ScheduleConfig resolve_schedule(const TrainOptions& o) {
  refuse_if(o.lr_schedule != optim::ScheduleKind::kPolynomial, o, "poly-power",
            "applies to --lr-schedule poly only; this run's is " + optim::to_string(o.lr_schedule),
            "drop --poly-power or give --lr-schedule poly");
  ScheduleConfig s;
  s.kind = o.lr_schedule;
  s.end_lr = o.end_lr;
  s.warmup_epochs = o.warmup_epochs;
  s.poly_power = o.poly_power;
  s.decay_epochs = o.decay_epochs > 0 ? o.decay_epochs : o.epochs;
  return s;
}

// "N" epochs or "Nm" minutes.
void parse_checkpoint_every(const std::string& every, CheckpointConfig& c) {
  char* end = nullptr;
  const double n = std::strtod(every.c_str(), &end);
  const std::string suffix = end ? std::string(end) : std::string();
  NOSTRUM_CHECK(!every.empty() && n > 0 && (suffix.empty() || suffix == "m") &&
                    (suffix == "m" || n == static_cast<int>(n)),
                OptionError, "invalid value '" + every + "'", "--checkpoint-every",
                "N epochs (a positive integer) or N minutes (e.g. 30m)");
  c.every_epochs = suffix.empty() ? static_cast<int>(n) : 0;
  c.every_minutes = suffix == "m" ? n : 0.0;
}

CheckpointConfig resolve_checkpoint(const TrainOptions& o) {
  const bool no_dir = o.checkpoint_dir.empty();
  const std::string hint = "give --checkpoint-dir, or drop the option";
  refuse_if(no_dir, o, "checkpoint-every", "needs --checkpoint-dir (where checkpoints go)", hint);
  refuse_if(no_dir, o, "keep-checkpoints", "needs --checkpoint-dir (where checkpoints go)", hint);
  NOSTRUM_CHECK(!o.resume || !no_dir, OptionError,
                "--resume needs --checkpoint-dir (where to look)", "--resume");
  NOSTRUM_CHECK(!(o.resume && !o.resume_from.empty()), OptionError,
                "give --resume or --resume-from, not both", "--resume-from " + o.resume_from);
  CheckpointConfig c;
  c.dir = o.checkpoint_dir;
  parse_checkpoint_every(o.checkpoint_every, c);
  c.keep = o.keep_checkpoints;
  c.resume = o.resume;
  c.resume_from = o.resume_from;
  return c;
}

ParallelConfig resolve_parallel(const TrainOptions& o) {
  refuse_if(!o.sync_bn, o, "sync-bn-group", "needs --sync-bn (groups of what it synchronises)",
            "add --sync-bn, or drop --sync-bn-group");
  ParallelConfig p;
  p.threads = o.threads;
  p.bucket_mb = o.bucket_mb;
  p.overlap = o.overlap;
  p.sync_bn = o.sync_bn;
  p.sync_bn_group = o.sync_bn_group;
  p.stall_timeout = o.stall_timeout;
  return p;
}

LoggingConfig resolve_logging(const TrainOptions& o) {
  LoggingConfig l;
  l.mllog = o.mllog;
  l.trace = o.trace;
  l.quiet = o.quiet;
  l.verbose = o.verbose;
  l.progress_seconds = o.progress_seconds;
  l.submission_org = o.submission_org;
  l.submission_platform = o.submission_platform;
  l.submission_status = o.submission_status;
  l.options_text = o.options_text;
  return l;
}

}  // namespace

EvaluationConfig resolve_evaluation(const TrainOptions& o) {
  NOSTRUM_CHECK(!o.eval_only || !o.init_weights.empty(), OptionError,
                "--eval-only needs --init-weights (the weights to evaluate)", "--eval-only");
  EvaluationConfig e;
  e.every = o.eval_every;
  e.offset = o.eval_offset;
  e.last_epoch = o.epochs;
  e.only = o.eval_only;
  return e;
}

const std::vector<std::string>& overlap_policy_names() {
  static const std::vector<std::string> names = {"auto", "on", "off"};
  return names;
}

RunConfig resolve(const TrainOptions& o) {
  cpu_features();  // an unknown NOSTRUM_MAX_ISA is an option error, reported before any work
  RunConfig c;
  // The combinations that need no data first: their errors do not depend on --data.
  c.optimizer = resolve_optimizer(o, c.notes);
  c.schedule = resolve_schedule(o);
  c.training = resolve_training(o);
  c.evaluation = resolve_evaluation(o);
  c.checkpoint = resolve_checkpoint(o);
  c.parallel = resolve_parallel(o);
  c.logging = resolve_logging(o);
  c.data = resolve_data(o);
  c.model = resolve_model(o, c.data.manifest);
  return c;
}

}  // namespace nostrum::train
