// Run observers: the console progress, the MLPerf log and the Chrome trace of a run.
#include "observers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nostrum/log/mllog_keys.hpp"
#include "nostrum/log/resnet_hyperparameters.hpp"

namespace nostrum::train {

namespace keys = log::keys;

namespace {

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

log::ResnetHyperparameters hyperparameters(const Run& run) {
  const OptimizerConfig& o = run.config.optimizer;
  const ScheduleConfig& schedule = run.config.schedule;
  const ParallelConfig& p = run.config.parallel;
  const int64_t batch = run.config.data.batch_size;
  log::ResnetHyperparameters h;
  h.optimizer = o.kind;
  h.base_lr = run.plan.base_lr;
  h.end_lr = schedule.end_lr;
  h.poly_power = schedule.poly_power;
  h.decay_steps = run.schedule->options().decay_steps;
  h.warmup_epochs = schedule.warmup_epochs;
  h.momentum = o.momentum;
  h.weight_decay = o.weight_decay;
  h.epsilon = 0.0;
  h.bn_span = p.sync_bn ? batch * (p.sync_bn_group ? p.sync_bn_group : run.plan.ranks) : batch;
  return h;
}

// The MLPerf block an epoch belongs to starts after the previous evaluation.
int block_first_epoch(const EvaluationConfig& evaluation, int epoch) {
  int first = epoch;
  while (first > 1 && !evaluation.due_after(first - 1)) --first;
  return first;
}

}  // namespace

std::vector<std::string> closed_division_violations(const Run& run) {
  std::vector<std::string> violations = log::closed_division_violations(hyperparameters(run));
  if (run.config.schedule.kind != optim::ScheduleKind::kPolynomial)
    violations.push_back(
        "the closed division's ResNet recipe decays the LR polynomially (--lr-schedule poly)");
  // What the optimizer does (LARS exempts them always), not which flag was given.
  if (!run.config.optimizer.exempt_bias_and_norm)
    violations.push_back("the reference exempts BN and bias parameters from weight decay");
  return violations;
}

// ---- ProgressPrinter
// ------------------------------------------------------------------------------

void ProgressPrinter::say(const std::string& line) {
  if (enabled_) out_ << line << std::endl;
}

void ProgressPrinter::on_setup_done(const Run& run) {
  for (const std::string& note : run.notes) {
    if (!enabled_) break;
    out_ << note << (note.empty() || note.back() != '\n' ? "\n" : "");
  }
  out_.flush();
  if (run.config.evaluation.only) return;
  for (const std::string& v : closed_division_violations(run))
    say("warning: MLPerf closed division: " + v + " (logged as open)");
  const RunConfig& c = run.config;
  say("recipe: " + std::string(optim::to_string(c.optimizer.kind)) + " lr " +
      std::to_string(run.plan.base_lr) + " (" + optim::to_string(c.schedule.kind) + ", warmup " +
      std::to_string(c.schedule.warmup_epochs) + " epochs), global batch " +
      std::to_string(run.plan.global_batch) + ", " + std::to_string(run.plan.steps_per_epoch) +
      " steps/epoch, target " + std::to_string(c.training.target_accuracy) +
      " in <= " + std::to_string(c.training.epochs) + " epochs");
}

void ProgressPrinter::on_run_start(const Run&) {
  run_start_s_ = monotonic_seconds();
}

void ProgressPrinter::on_epoch_start(const Run&) {
  epoch_start_s_ = monotonic_seconds();
  last_progress_s_ = 0.0;
  epoch_loss_sum_ = 0.0;
  epoch_steps_ = 0;
}

void ProgressPrinter::on_step(const Run& run, const StepRecord& step) {
  epoch_loss_sum_ += step.loss;
  ++epoch_steps_;
  const double elapsed = step.end_s - epoch_start_s_;
  if (!enabled_ || elapsed - last_progress_s_ < run.config.logging.progress_seconds) return;
  last_progress_s_ = elapsed;
  const int64_t total = run.plan.steps_per_epoch;
  const double rate = epoch_steps_ * run.plan.global_batch / elapsed;
  const double remaining = (total - step.step_in_epoch - 1) * run.plan.global_batch / rate;
  char line[200];
  std::snprintf(line, sizeof line,
                "  epoch %d step %lld/%lld  loss %.4f (rank 0)  %.0f img/s  epoch ETA %s",
                run.state.epoch, static_cast<long long>(step.step_in_epoch + 1),
                static_cast<long long>(total), epoch_loss_sum_ / epoch_steps_, rate,
                format_duration(remaining).c_str());
  out_ << line << std::endl;
}

void ProgressPrinter::on_epoch_end(const Run& run, const EpochSummary& e) {
  if (!enabled_) return;
  char line[300];
  std::snprintf(
      line, sizeof line,
      "epoch %d/%d  loss %.4f  %.0f img/s  %.1f s  (data wait %.1f%%, allreduce "
      "%.2f s of which hidden %.0f%%)",
      e.epoch, run.config.training.epochs, e.mean_loss, e.images_per_second, e.seconds,
      e.seconds > 0 ? 100.0 * e.data_wait_seconds / e.seconds : 0.0, e.comm.allreduce_seconds,
      e.comm.allreduce_seconds > 0 ? 100.0 * e.comm.hidden_seconds / e.comm.allreduce_seconds
                                   : 0.0);
  out_ << line << std::endl;
}

void ProgressPrinter::on_eval(const Run& run, const EvalPoint& eval) {
  if (run.config.evaluation.only) {
    say("eval-only: top-1 accuracy " + std::to_string(eval.accuracy) + " on " +
        std::to_string(run.plan.eval_samples) + " images");
    return;
  }
  say("eval after epoch " + std::to_string(eval.epoch) + ": top-1 accuracy " +
      std::to_string(eval.accuracy) + " (target " +
      std::to_string(run.config.training.target_accuracy) + ") at " +
      format_duration(eval.seconds_since_run_start));
}

// ---- MlperfObserver
// -------------------------------------------------------------------------------

MlperfObserver::MlperfObserver(const LoggingConfig& logging, bool rank0, bool defer_open)
    : path_(logging.mllog), rank0_(rank0), log_(std::make_unique<log::MlLogger>()) {
  if (!defer_open) start_log();
}

void MlperfObserver::start_log() {
  log_ = std::make_unique<log::MlLogger>(rank0_, path_, /*to_stdout=*/false);
  log_->event(NOSTRUM_HERE, keys::kCacheClear, true);
  log_->start(NOSTRUM_HERE, keys::kInitStart);
}

void MlperfObserver::continue_log(int64_t keep_bytes) {
  log_ = std::make_unique<log::MlLogger>(rank0_, path_, /*to_stdout=*/false, keep_bytes);
  resumed_ = true;
}

void MlperfObserver::on_setup_done(const Run& run) {
  if (run.config.evaluation.only || resumed_) return;
  const LoggingConfig& o = run.config.logging;
  const bool closed = closed_division_violations(run).empty();
  log_->event(NOSTRUM_HERE, keys::kSubmissionBenchmark, keys::kResnet);
  log_->event(NOSTRUM_HERE, keys::kSubmissionDivision, closed ? "closed" : "open");
  log_->event(NOSTRUM_HERE, keys::kSubmissionOrg, o.submission_org);
  log_->event(NOSTRUM_HERE, keys::kSubmissionPlatform, o.submission_platform);
  log_->event(NOSTRUM_HERE, keys::kSubmissionStatus, o.submission_status);
  log_->event(NOSTRUM_HERE, keys::kGlobalBatchSize, run.plan.global_batch);
  log_->event(NOSTRUM_HERE, keys::kGradientAccumulationSteps, 1);
  log_->event(NOSTRUM_HERE, keys::kSeed, static_cast<int64_t>(run.config.training.seed));
  log_->event(NOSTRUM_HERE, keys::kTrainSamples, run.plan.train_samples);
  log_->event(NOSTRUM_HERE, keys::kEvalSamples, run.plan.eval_samples);
  log::log_hyperparameters(*log_, NOSTRUM_HERE, hyperparameters(run));
  log_->end(NOSTRUM_HERE, keys::kInitStop);
}

void MlperfObserver::on_run_start(const Run&) {
  if (!resumed_) log_->start(NOSTRUM_HERE, keys::kRunStart);
}

void MlperfObserver::on_epoch_start(const Run& run) {
  if (run.state.step_in_epoch > 0) return;  // resumed mid-epoch: its start is in the log
  const EvaluationConfig& evaluation = run.config.evaluation;
  const int epoch = run.state.epoch;
  if (block_first_epoch(evaluation, epoch) == epoch) {
    int last = epoch;
    while (!evaluation.due_after(last)) ++last;
    log_->start(NOSTRUM_HERE, keys::kBlockStart, {},
                {{keys::kFirstEpochNum, epoch}, {keys::kEpochCount, last - epoch + 1}});
  }
  log_->start(NOSTRUM_HERE, keys::kEpochStart, {}, {{keys::kEpochNum, epoch}});
}

void MlperfObserver::on_epoch_end(const Run&, const EpochSummary& e) {
  log_->end(NOSTRUM_HERE, keys::kEpochStop, {}, {{keys::kEpochNum, e.epoch}});
}

void MlperfObserver::on_eval_start(const Run& run) {
  log_->start(NOSTRUM_HERE, keys::kEvalStart, {}, {{keys::kEpochNum, run.state.epoch}});
}

void MlperfObserver::on_eval(const Run& run, const EvalPoint& eval) {
  if (run.config.evaluation.only) return;
  log_->end(NOSTRUM_HERE, keys::kEvalStop, {}, {{keys::kEpochNum, eval.epoch}});
  log_->event(NOSTRUM_HERE, keys::kEvalAccuracy, eval.accuracy, {{keys::kEpochNum, eval.epoch}});
  log_->end(NOSTRUM_HERE, keys::kBlockStop, {},
            {{keys::kFirstEpochNum, block_first_epoch(run.config.evaluation, eval.epoch)}});
}

void MlperfObserver::on_run_end(const Run& run) {
  if (run.config.evaluation.only) return;
  log_->end(NOSTRUM_HERE, keys::kRunStop, {}, {{keys::kStatus, to_string(run.state.status)}});
}

// ---- TraceRecorder
// --------------------------------------------------------------------------------

// The model's per-layer forward/backward spans, on the main thread's track.
class TraceRecorder::LayerSpans final : public model::LayerObserver {
 public:
  explicit LayerSpans(log::TraceWriter& trace) : trace_(trace) {}
  void on_layer(const std::string& layer, model::Phase phase, double start_s,
                double end_s) override {
    trace_.span(layer.c_str(), phase == model::Phase::kForward ? "forward" : "backward", 0, start_s,
                end_s);
  }

 private:
  log::TraceWriter& trace_;
};

TraceRecorder::TraceRecorder(const std::string& path, int rank)
    : path_(path),
      trace_(rank, size_t{1} << 22),
      layer_spans_(std::make_unique<LayerSpans>(trace_)) {
  trace_.name_thread(0, "main");
  trace_.name_thread(1, "gradient allreduce");
}

TraceRecorder::~TraceRecorder() {
  if (model_) model_->set_observer(nullptr);
}

void TraceRecorder::on_setup_done(const Run& run) {
  model_ = run.model.get();
  model_->set_observer(layer_spans_.get());
}

void TraceRecorder::on_step(const Run& run, const StepRecord& step) {
  trace_.span("data wait", "data", 0, step.begin_s, step.data_ready_s);
  trace_.span("allreduce wait", "comm", 0, step.backward_end_s, step.allreduce_done_s);
  if (!run.allreducer) return;
  for (const mpi::BucketEvent& e :
       run.allreducer->bucket_events()) {  // times from backward_begin_s
    trace_.instant_at("bucket ready", "comm", 1, step.backward_begin_s + e.ready);
    trace_.span("allreduce bucket", "comm", 1, step.backward_begin_s + e.start,
                step.backward_begin_s + e.end);
  }
}

void TraceRecorder::on_eval_start(const Run&) {
  trace_.begin("evaluate", "eval", 0);
}
void TraceRecorder::on_eval(const Run&, const EvalPoint&) {
  trace_.end("evaluate", "eval", 0);
}

void TraceRecorder::on_run_end(const Run&) {
  trace_.write(log::TraceWriter::path_for_rank(path_, trace_.rank()));
}

}  // namespace nostrum::train
