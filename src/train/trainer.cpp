// The training loop of nostrum-train: set-up, then epochs of steps with an evaluation after each
// due epoch, until the target accuracy or the budget; observers watch, the loop decides.
#include "trainer.hpp"

#include <cmath>
#include <csignal>
#include <functional>
#include <iostream>
#include <memory>

#include "checkpointing.hpp"
#include "evaluate.hpp"
#include "exit_status.hpp"
#include "io/weights_file.hpp"
#include "mpi/weight_sync.hpp"
#include "setup.hpp"
#include "train_step.hpp"

namespace nostrum::train {

namespace {

template <typename Event>
void notify(const std::vector<RunObserver*>& observers, Event event) {
  for (RunObserver* o : observers) event(*o);
}

bool step_budget_spent(const Run& run) {
  const int64_t max_steps = run.config.training.max_steps;
  return max_steps > 0 && run.state.steps_taken >= max_steps;
}

// Evaluates after the current epoch and records the point; true when the target is reached.
bool evaluate_epoch(Run& run, const std::vector<RunObserver*>& observers, double run_start_s) {
  notify(observers, [&](RunObserver& o) { o.on_eval_start(run); });
  const double eval_start_s = monotonic_seconds();
  const double accuracy = evaluate(run);
  run.state.time.evaluation += monotonic_seconds() - eval_start_s;
  const EvalPoint point{run.state.epoch, accuracy, monotonic_seconds() - run_start_s};
  run.state.evals.push_back(point);
  notify(observers, [&](RunObserver& o) { o.on_eval(run, point); });
  return accuracy >= run.config.training.target_accuracy;
}

// --eval-only: one evaluation of the given weights.
RunResult evaluate_only(Run& run, const std::vector<RunObserver*>& observers) {
  notify(observers, [&](RunObserver& o) { o.on_setup_done(run); });
  const double accuracy = evaluate(run);
  run.state.evals.push_back({0, accuracy, 0.0});
  run.state.status = RunStatus::kEvaluated;
  notify(observers, [&](RunObserver& o) { o.on_eval(run, run.state.evals.back()); });
  return make_result(run, 0.0, 0, 0);
}

// Final weights and BN statistics, identical on every rank (checked: every run ends right after an
// evaluation, which averaged the statistics), saved by rank 0.
RunResult finish(Run& run, double time_to_solution) {
  model::Model& net = *run.model;
  const uint64_t weights = mpi::verify_identical(run.world, net.parameter_data(),
                                                 net.parameter_count(), "final weights");
  const uint64_t buffers = mpi::verify_identical(run.world, net.buffer_data(), net.buffer_count(),
                                                 "final batch-norm statistics");
  const ModelSetup& m = run.config.model;
  if (!m.save_weights.empty() && run.rank0())
    io::save_weights(m.save_weights, net.parameters(), m.config.name);
  return make_result(run, time_to_solution, weights, buffers);
}

// --checkpoint-dir must be writable: a clear error at start-up, not at the first checkpoint.
void require_writable_checkpoint_dir(const RunConfig& config, const mpi::Communicator& world) {
  if (!config.checkpoint.enabled() || config.evaluation.only) return;
  std::string problem;
  if (world.rank() == 0) {
    try {
      io::check_checkpoint_dir(config.checkpoint.dir);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  world.broadcast(problem, 0);
  NOSTRUM_CHECK(problem.empty(), OptionError, problem, "--checkpoint-dir");
}

// --resume / --resume-from: restores the chosen checkpoint and continues its MLPerf log, or starts
// afresh (saying so). Returns the time-to-solution already spent.
double resume_if_asked(Run& run, MlperfObserver& mlperf, ProgressPrinter& progress) {
  if (!run.config.checkpoint.resuming()) return 0.0;
  ResumePoint resume = find_resume_point(run, [&](const std::string& line) { progress.say(line); });
  if (resume.path.empty()) {
    mlperf.start_log();
    return 0.0;
  }
  const CheckpointMark mark = restore_checkpoint(run, resume.state, resume.path);
  run.resumed = true;
  NOSTRUM_CHECK(run.state.seed == run.config.training.seed, OptionError,
                "the checkpoint's run used --seed " + std::to_string(run.state.seed), "--seed",
                "resume with the same seed (sampling and augmentation follow it)");
  mlperf.continue_log(mark.mllog_bytes);
  const RunState& s = run.state;
  progress.say("resumed from " + resume.path + ": epoch " + std::to_string(s.epoch) + " step " +
               std::to_string(s.step_in_epoch) + " (run step " + std::to_string(s.steps_taken) +
               "), " + std::to_string(mark.seconds_spent) + " s of time-to-solution so far, " +
               std::to_string(mark.ranks) + " rank(s) then, " + std::to_string(run.world.size()) +
               " now");
  return mark.seconds_spent;
}

// --stall-timeout over more than one rank: the heartbeat watchdog (mpi/stall_watchdog.hpp).
void start_stall_watchdog(Run& run) {
  const double timeout = run.config.parallel.stall_timeout;
  if (timeout <= 0 || run.world.size() == 1) return;
  mpi::StallWatchdogOptions w;
  w.timeout_seconds = timeout;
  run.watchdog =
      std::make_unique<mpi::StallWatchdog>(run.world, mpi::Communicator::thread_level(), w);
  run.notes.push_back(run.watchdog->enabled()
                          ? "stall watchdog: a rank stalled for " +
                                std::to_string(std::lround(timeout)) + " s aborts the job"
                          : "note: " + run.watchdog->note());
}

// When a training run writes checkpoints (--checkpoint-dir: every N epochs, every N minutes, on a
// stop signal), and the stop signal the ranks agreed on.
class Checkpointer {
 public:
  Checkpointer(Run& run, MlperfObserver& mlperf, ProgressPrinter& progress, double run_start_s)
      : run_(run), mlperf_(mlperf), progress_(progress), run_start_s_(run_start_s) {
    arm_timer();
  }
  bool enabled() const { return run_.config.checkpoint.enabled(); }
  bool stopped() const { return stopped_; }

  // Collective. epoch_closed: saved as the next epoch at step 0 (see capture_checkpoint).
  void save(const char* why, bool epoch_closed) {
    const CheckpointMark mark{run_.world.size(), monotonic_seconds() - run_start_s_,
                              mlperf_.log_bytes()};
    const io::CheckpointState state = capture_checkpoint(run_, mark, epoch_closed);
    std::string path;
    {
      mpi::StallWatchdog::Wait wait(run_.watchdog.get());  // the others wait while rank 0 writes
      path = write_run_checkpoint(run_, state);
    }
    progress_.say(std::string("checkpoint (") + why + "): " + path);
    arm_timer();
  }

  // After every step (train_epoch's after_step): false when the ranks agreed to stop.
  bool after_step(const StepRecord& step) {
    if (step.stop) {
      stopped_ = true;
      const int sig = stop_signal_received();
      progress_.say(std::string("stop signal (") +
                    (sig == SIGUSR1   ? "SIGUSR1"
                     : sig == SIGTERM ? "SIGTERM"
                                      : "another rank's") +
                    "): stopping after " + std::to_string(step.step + 1) + " steps");
      return false;
    }
    if (step.checkpoint_due && enabled()) save("timed", false);
    return true;
  }

  // After an epoch that did not end the run (evaluated when due).
  void after_epoch(int epoch) {
    const int every = run_.config.checkpoint.every_epochs;
    if (enabled() && every > 0 && epoch % every == 0) save("epoch end", true);
  }

 private:
  void arm_timer() {
    const double every_s = run_.config.checkpoint.every_minutes * 60.0;
    if (enabled() && every_s > 0 && run_.rank0())
      run_.timed_checkpoint_due_s = monotonic_seconds() + every_s;
  }
  Run& run_;
  MlperfObserver& mlperf_;
  ProgressPrinter& progress_;
  double run_start_s_;
  bool stopped_ = false;
};

// Every rank agreed on a stop signal at the same step: checkpoint and leave (status checkpointed).
RunResult checkpoint_and_stop(Run& run, Checkpointer& checkpointer, ProgressPrinter& progress,
                              double run_start_s) {
  if (!checkpointer.enabled())
    throw Error("stopped by a signal at run step " + std::to_string(run.state.steps_taken) +
                    " without --checkpoint-dir: nothing was saved",
                "rank " + std::to_string(run.world.rank()),
                "give --checkpoint-dir so that a preempted run can resume");
  checkpointer.save("stop signal", false);
  run.state.status = RunStatus::kCheckpointed;
  progress.say("checkpointed after a stop signal: exiting with status " +
               std::to_string(kExitCheckpointed) + " (requeue; --resume continues)");
  return make_result(run, monotonic_seconds() - run_start_s, 0, 0);
}

}  // namespace

EpochSummary train_epoch(Run& run, const std::vector<RunObserver*>& observers,
                         const std::function<bool(const StepRecord&)>& after_step) {
  RunState& s = run.state;
  EpochSummary e;
  e.epoch = s.epoch;
  io::Loader& loader = *run.train_loader;
  loader.start_epoch(s.epoch - 1, s.step_in_epoch);  // a resumed run continues mid-epoch
  double loss_sum = 0.0;
  bool go_on = true;
  while (go_on && s.step_in_epoch < run.plan.steps_per_epoch && !step_budget_spent(run)) {
    const StepRecord step = train_step(run);
    notify(observers, [&](RunObserver& o) { o.on_step(run, step); });
    if (after_step) go_on = after_step(step);
    loss_sum += step.loss;
    ++e.steps;
    e.seconds += step.wall_seconds();
    e.data_wait_seconds += step.data_wait_seconds();
    e.comm += step.comm;
  }
  double loss[2] = {loss_sum, static_cast<double>(e.steps)};
  {
    mpi::StallWatchdog::Wait wait(run.watchdog.get());
    run.world.allreduce_sum(loss, 2);
  }
  e.mean_loss = loss[1] > 0 ? loss[0] / loss[1] : 0.0;
  e.images_per_second = e.seconds > 0 ? e.steps * run.plan.global_batch / e.seconds : 0.0;
  return e;
}

RunResult run_training(const RunConfig& config, const mpi::Communicator& world) {
  const bool rank0 = world.rank() == 0;
  const LoggingConfig& logging = config.logging;
  // A resumed run appends to its MLPerf log (opened once the checkpoint is chosen).
  MlperfObserver mlperf(logging, rank0, /*defer_open=*/config.checkpoint.resuming());  // init_start
  ProgressPrinter progress(std::cout, rank0 && !logging.quiet);
  std::unique_ptr<TraceRecorder> trace;
  if (!logging.trace.empty()) trace = std::make_unique<TraceRecorder>(logging.trace, world.rank());
  std::vector<RunObserver*> observers = {&mlperf, &progress};
  if (trace) observers.push_back(trace.get());
  install_stop_signal_handlers();
  require_writable_checkpoint_dir(config, world);

  std::unique_ptr<Run> owned = setup_run(config, world);
  Run& run = *owned;
  if (config.evaluation.only) return evaluate_only(run, observers);
  const double seconds_spent = resume_if_asked(run, mlperf, progress);
  start_stall_watchdog(run);

  world.barrier();
  notify(observers, [&](RunObserver& o) { o.on_setup_done(run); });
  world.barrier();
  // Time-to-solution continues: the clock starts where a checkpointed run's stood.
  const double run_start_s = monotonic_seconds() - seconds_spent;
  notify(observers, [&](RunObserver& o) { o.on_run_start(run); });
  Checkpointer checkpointer(run, mlperf, progress, run_start_s);
  const auto after_step = [&](const StepRecord& step) { return checkpointer.after_step(step); };
  RunState& s = run.state;
  try {
    for (;; ++s.epoch, s.step_in_epoch = 0) {
      notify(observers, [&](RunObserver& o) { o.on_epoch_start(run); });
      const EpochSummary epoch = train_epoch(run, observers, after_step);
      if (checkpointer.stopped())
        return checkpoint_and_stop(run, checkpointer, progress, run_start_s);
      notify(observers, [&](RunObserver& o) { o.on_epoch_end(run, epoch); });
      const bool last = s.epoch == config.training.epochs || step_budget_spent(run);
      if ((config.evaluation.due_after(s.epoch) || last) &&
          evaluate_epoch(run, observers, run_start_s)) {
        s.status = RunStatus::kSuccess;
        break;
      }
      if (last) {
        s.status = RunStatus::kAborted;
        break;
      }
      checkpointer.after_epoch(s.epoch);
    }
  } catch (const NonFiniteError&) {
    s.status = RunStatus::kAborted;  // the MLPerf log ends as a run that stopped
    notify(observers, [&](RunObserver& o) { o.on_run_end(run); });
    throw;
  }
  const double time_to_solution = monotonic_seconds() - run_start_s;
  notify(observers, [&](RunObserver& o) { o.on_run_end(run); });
  return finish(run, time_to_solution);
}

}  // namespace nostrum::train
