// Run observers: what watches a run without steering it. The trainer tells each observer what
// happened (set-up done, run start, each step, each epoch, each evaluation, run end); the progress
// printer, the MLPerf log and the Chrome trace are observers. None of them calls MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "nostrum/log/mllog.hpp"
#include "nostrum/log/trace.hpp"
#include "run.hpp"
#include "train_step.hpp"

namespace nostrum::train {

// One epoch's numbers, over all ranks.
struct EpochSummary {
  int epoch = 0;
  int64_t steps = 0;
  double mean_loss = 0.0;  // over every rank's steps
  double seconds = 0.0;    // wall time of the epoch's steps on this rank
  double images_per_second = 0.0;
  double data_wait_seconds = 0.0;  // this rank's
  mpi::AllreduceTimings comm;      // this rank's
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void on_setup_done(const Run&) {}  // set-up over, all ranks synchronised
  virtual void on_run_start(const Run&) {}   // the timed run begins
  virtual void on_epoch_start(const Run&) {}
  virtual void on_step(const Run&, const StepRecord&) {}
  virtual void on_epoch_end(const Run&, const EpochSummary&) {}
  virtual void on_eval_start(const Run&) {}
  virtual void on_eval(const Run&, const EvalPoint&) {}
  virtual void on_run_end(const Run&) {}  // state.status is final
};

// The rules of MLPerf's closed division that the run's recipe breaks, one readable line each
// (the log then says division "open"); empty when it complies.
std::vector<std::string> closed_division_violations(const Run& run);

// Rank 0's console: set-up notes, the recipe, progress lines every --progress-seconds inside an
// epoch, a line per epoch and per evaluation. Silent on other ranks and with --quiet.
class ProgressPrinter final : public RunObserver {
 public:
  ProgressPrinter(std::ostream& out, bool enabled) : out_(out), enabled_(enabled) {}
  void say(const std::string& line);
  void on_setup_done(const Run& run) override;
  void on_run_start(const Run& run) override;
  void on_epoch_start(const Run& run) override;
  void on_step(const Run& run, const StepRecord& step) override;
  void on_epoch_end(const Run& run, const EpochSummary& epoch) override;
  void on_eval(const Run& run, const EvalPoint& eval) override;

 private:
  std::ostream& out_;
  bool enabled_;
  double run_start_s_ = 0.0, epoch_start_s_ = 0.0, last_progress_s_ = 0.0;
  double epoch_loss_sum_ = 0.0;
  int64_t epoch_steps_ = 0;
};

// The MLPerf log (rank 0 writes it): cache_clear and init_start at construction (before set-up),
// the submission and hyperparameter keys and init_stop when set-up is done, then run, block, epoch
// and evaluation intervals, eval_accuracy, and run_stop with the status.
class MlperfObserver final : public RunObserver {
 public:
  // Throws IoError naming --mllog's path when it cannot be opened. defer_open (a run that may
  // resume): nothing is written until start_log() (a fresh run after all) or continue_log().
  MlperfObserver(const LoggingConfig& logging, bool rank0, bool defer_open = false);
  void start_log();  // opens the log and writes cache_clear and init_start
  // A resumed run: keeps the log's first keep_bytes (what the checkpointed run had written) and
  // appends; set-up and run_start are not logged again, nor epoch_start of a resumed epoch.
  void continue_log(int64_t keep_bytes);
  int64_t log_bytes() { return log_->file_bytes(); }  // for the checkpoint
  void on_setup_done(const Run& run) override;
  void on_run_start(const Run& run) override;
  void on_epoch_start(const Run& run) override;
  void on_epoch_end(const Run& run, const EpochSummary& epoch) override;
  void on_eval_start(const Run& run) override;
  void on_eval(const Run& run, const EvalPoint& eval) override;
  void on_run_end(const Run& run) override;

 private:
  std::string path_;  // --mllog (empty: no log)
  bool rank0_;
  bool resumed_ = false;
  std::unique_ptr<log::MlLogger> log_;
};

// --trace: each rank's Chrome trace (per-layer spans through the model's LayerObserver, data and
// allreduce waits, bucket events, evaluations), written to FILE.rankN.<ext> when the run ends.
class TraceRecorder final : public RunObserver {
 public:
  TraceRecorder(const std::string& path, int rank);
  ~TraceRecorder() override;
  void on_setup_done(const Run& run) override;  // attaches the layer timing hook
  void on_step(const Run& run, const StepRecord& step) override;
  void on_eval_start(const Run& run) override;
  void on_eval(const Run& run, const EvalPoint& eval) override;
  void on_run_end(const Run& run) override;

 private:
  class LayerSpans;
  std::string path_;
  log::TraceWriter trace_;
  std::unique_ptr<LayerSpans> layer_spans_;
  model::Model* model_ = nullptr;
};

}  // namespace nostrum::train
