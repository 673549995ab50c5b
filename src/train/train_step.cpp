// train_step: data -> forward -> loss -> backward + allreduce -> optimizer, and the accounting.
#include "train_step.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <string>

#include "checkpointing.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::train {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StepRecord train_step(Run& run) {
  StepRecord r;
  RunState& s = run.state;
  model::Model& net = *run.model;
  r.step = s.steps_taken;
  r.step_in_epoch = s.step_in_epoch;
  r.begin_s = monotonic_seconds();
  if (run.watchdog) run.watchdog->set_step(s.steps_taken);
  const TrainingConfig& t = run.config.training;
  if (s.steps_taken == t.debug_hold_at_step && !run.resumed)  // --debug-hold-at-step
    hold_until_stop_signal(run.world, "before run step " + std::to_string(s.steps_taken),
                           run.watchdog.get());

  io::Batch batch;
  NOSTRUM_CHECK(run.train_loader->next(batch), DataError,
                "the training loader ended early at step " + std::to_string(s.step_in_epoch) +
                    " of epoch " + std::to_string(s.epoch),
                run.config.data.dir);
  r.data_ready_s = monotonic_seconds();
  r.images = batch.count;
  if (s.steps_taken == t.debug_inject_nan_at_step && run.rank0() && batch.count > 0)
    batch.images[0] = std::nanf("");  // --debug-inject-nan-at-step: rank 0's first pixel

  net.forward(batch.images, static_cast<int>(batch.count), /*training=*/true);
  r.loss = net.loss(batch.labels, static_cast<float>(t.label_smoothing), run.plan.grad_scale);
  r.backward_begin_s = monotonic_seconds();
  if (run.allreducer) {
    mpi::GradientAllreducer& allreducer = *run.allreducer;
    allreducer.begin_step();
    net.backward([&](size_t ready_from) { allreducer.on_ready(ready_from); });
    r.backward_end_s = monotonic_seconds();
    {
      mpi::StallWatchdog::Wait wait(run.watchdog.get());
      r.comm = allreducer.finish_step();
    }
    r.allreduce_done_s = monotonic_seconds();
  } else {
    net.backward();
    r.backward_end_s = r.allreduce_done_s = monotonic_seconds();
  }
  // Every rank agrees on stop / timed checkpoint / non-finite (the gradients are the same on every
  // rank after the allreduce; a rank's loss is its own). One 3-integer allreduce per step.
  if (s.steps_taken == t.debug_signal_at_step && run.world.rank() == run.world.size() - 1)
    std::raise(SIGUSR1);  // --debug-signal-at-step: through the real handler
  const bool finite =
      std::isfinite(r.loss) && all_finite(net.gradient_data(), net.parameter_count());
  const bool due = run.rank0() && run.timed_checkpoint_due_s > 0 &&
                   monotonic_seconds() >= run.timed_checkpoint_due_s;
  StepAgreement agreed;
  {
    mpi::StallWatchdog::Wait wait(run.watchdog.get());
    agreed = agree(run.world, stop_signal_received() != 0, due, !finite);
  }
  if (agreed.nonfinite) {
    const std::string first = first_nonfinite(net.parameters());
    throw NonFiniteError(
        "the training loss or gradients became NaN/Inf at epoch " + std::to_string(s.epoch) +
            " step " + std::to_string(s.step_in_epoch) + " (run step " +
            std::to_string(s.steps_taken) + ")" +
            (first.empty() ? std::string(": on another rank's loss")
                           : ": first non-finite " + first) +
            "; the run stops before the optimizer step, and no checkpoint is written",
        "rank " + std::to_string(run.world.rank()),
        "lower --lr or add --warmup-epochs; resume from the last checkpoint");
  }
  r.stop = agreed.stop;
  r.checkpoint_due = agreed.checkpoint_due;
  r.lr = run.schedule->lr(s.steps_taken);
  run.optimizer->step(static_cast<float>(r.lr));
  r.end_s = monotonic_seconds();

  ++s.steps_taken;
  ++s.step_in_epoch;
  s.images_trained += run.plan.global_batch;
  s.train_seconds += r.wall_seconds();
  s.time.data_wait += r.data_wait_seconds();
  s.time.exposed_allreduce += r.comm.exposed_seconds;
  s.time.hidden_allreduce += r.comm.hidden_seconds;
  s.time.compute += r.wall_seconds() - r.data_wait_seconds() - r.comm.exposed_seconds;
  return r;
}

}  // namespace nostrum::train
