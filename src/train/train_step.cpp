// train_step: data -> forward -> loss -> backward + allreduce -> optimizer, and the accounting.
#include "train_step.hpp"

#include <chrono>
#include <cmath>
#include <string>

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

  io::Batch batch;
  NOSTRUM_CHECK(run.train_loader->next(batch), DataError,
                "the training loader ended early at step " + std::to_string(s.step_in_epoch) +
                    " of epoch " + std::to_string(s.epoch),
                run.options.data_dir);
  r.data_ready_s = monotonic_seconds();
  r.images = batch.count;

  net.forward(batch.images, static_cast<int>(batch.count), /*training=*/true);
  r.loss = net.loss(batch.labels, static_cast<float>(run.options.label_smoothing),
                    run.plan.grad_scale);
  NOSTRUM_CHECK(std::isfinite(r.loss), DataError,
                "the training loss is not finite at epoch " + std::to_string(s.epoch) + " step " +
                    std::to_string(s.step_in_epoch),
                "rank " + std::to_string(run.world.rank()), "lower --lr or add --warmup-epochs");
  r.backward_begin_s = monotonic_seconds();
  if (run.allreducer) {
    mpi::GradientAllreducer& allreducer = *run.allreducer;
    allreducer.begin_step();
    net.backward([&](size_t ready_from) { allreducer.on_ready(ready_from); });
    r.backward_end_s = monotonic_seconds();
    r.comm = allreducer.finish_step();
    r.allreduce_done_s = monotonic_seconds();
    r.buckets = allreducer.bucket_events();
  } else {
    net.backward();
    r.backward_end_s = r.allreduce_done_s = monotonic_seconds();
  }
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
