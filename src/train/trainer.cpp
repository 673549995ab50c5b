// The training loop of nostrum-train: set-up, then epochs of steps with an evaluation after each
// due epoch, until the target accuracy or the budget; observers watch, the loop decides.
#include "trainer.hpp"

#include <iostream>
#include <memory>

#include "evaluate.hpp"
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
  return run.options.max_steps > 0 && run.state.steps_taken >= run.options.max_steps;
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
  return accuracy >= run.options.target_accuracy;
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

// Final weights and averaged BN statistics: identical on every rank (checked), saved by rank 0.
RunResult finish(Run& run, double time_to_solution) {
  model::Model& net = *run.model;
  average_bn_statistics(run);
  const uint64_t weights = mpi::verify_identical(run.world, net.parameter_data(),
                                                 net.parameter_count(), "final weights");
  const uint64_t buffers = mpi::verify_identical(run.world, net.buffer_data(), net.buffer_count(),
                                                 "final batch-norm statistics");
  if (!run.options.save_weights.empty() && run.rank0())
    io::save_weights(run.options.save_weights, net.parameters(), run.options.model);
  return make_result(run, time_to_solution, weights, buffers);
}

}  // namespace

EpochSummary train_epoch(Run& run, const std::vector<RunObserver*>& observers) {
  RunState& s = run.state;
  EpochSummary e;
  e.epoch = s.epoch;
  io::Loader& loader = *run.train_loader;
  loader.start_epoch(s.epoch - 1);
  double loss_sum = 0.0;
  while (s.step_in_epoch < run.plan.steps_per_epoch && !step_budget_spent(run)) {
    const StepRecord step = train_step(run);
    notify(observers, [&](RunObserver& o) { o.on_step(run, step); });
    loss_sum += step.loss;
    ++e.steps;
    e.seconds += step.wall_seconds();
    e.data_wait_seconds += step.data_wait_seconds();
    e.comm += step.comm;
  }
  double loss[2] = {loss_sum, static_cast<double>(e.steps)};
  run.world.allreduce_sum(loss, 2);
  e.mean_loss = loss[1] > 0 ? loss[0] / loss[1] : 0.0;
  e.images_per_second = e.seconds > 0 ? e.steps * run.plan.global_batch / e.seconds : 0.0;
  return e;
}

RunResult run_training(const TrainOptions& options, const mpi::Communicator& world) {
  const bool rank0 = world.rank() == 0;
  MlperfObserver mlperf(options, rank0);  // init_start: before set-up
  ProgressPrinter progress(std::cout, rank0 && !options.quiet);
  std::unique_ptr<TraceRecorder> trace;
  if (!options.trace.empty()) trace = std::make_unique<TraceRecorder>(options.trace, world.rank());
  std::vector<RunObserver*> observers = {&mlperf, &progress};
  if (trace) observers.push_back(trace.get());

  std::unique_ptr<Run> owned = setup_run(options, world);
  Run& run = *owned;
  if (options.eval_only) return evaluate_only(run, observers);

  world.barrier();
  notify(observers, [&](RunObserver& o) { o.on_setup_done(run); });
  world.barrier();
  const double run_start_s = monotonic_seconds();
  notify(observers, [&](RunObserver& o) { o.on_run_start(run); });
  RunState& s = run.state;
  for (;; ++s.epoch, s.step_in_epoch = 0) {
    notify(observers, [&](RunObserver& o) { o.on_epoch_start(run); });
    const EpochSummary epoch = train_epoch(run, observers);
    notify(observers, [&](RunObserver& o) { o.on_epoch_end(run, epoch); });
    const bool last = s.epoch == options.epochs || step_budget_spent(run);
    if ((eval_due(options, s.epoch) || last) && evaluate_epoch(run, observers, run_start_s)) {
      s.status = RunStatus::kSuccess;
      break;
    }
    if (last) {
      s.status = RunStatus::kAborted;
      break;
    }
  }
  const double time_to_solution = monotonic_seconds() - run_start_s;
  notify(observers, [&](RunObserver& o) { o.on_run_end(run); });
  return finish(run, time_to_solution);
}

}  // namespace nostrum::train
