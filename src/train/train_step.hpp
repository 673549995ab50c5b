// train_step: one training step of a Run on this rank (collective when the run has > 1 rank): the
// next batch, forward, loss, backward with the bucketed gradient allreduce, the optimizer at the
// schedule's rate. It advances the run's counters and time split and returns what happened, with
// the times observers need (the trace's spans). Everything the step reads is in the Run.
#pragma once

#include <cstdint>
#include <vector>

#include "mpi/gradient_allreducer.hpp"
#include "run.hpp"

namespace nostrum::train {

// Seconds of the monotonic clock (steady_clock since its epoch: what TraceWriter::span takes).
double monotonic_seconds();

struct StepRecord {
  int64_t step = 0;               // the run's step number (0-based: the schedule position used)
  int64_t step_in_epoch = 0;      // 0-based
  double loss = 0.0;              // this rank's mean loss over its batch
  double lr = 0.0;                // the rate the optimizer used
  int64_t images = 0;             // this rank's batch
  double begin_s = 0.0;           // monotonic seconds at the step's start
  double data_ready_s = 0.0;      // ... when the loader handed out the batch
  double backward_begin_s = 0.0;  // ... when backward began (bucket event times count from here)
  double backward_end_s = 0.0;    // ... when backward returned (allreduce wait begins)
  double allreduce_done_s = 0.0;  // ... when every gradient bucket was summed
  double end_s = 0.0;             // ... after the optimizer
  mpi::AllreduceTimings comm;     // zero for one rank
  bool stop = false;              // every rank agreed: a stop signal came (checkpoint and exit)
  bool checkpoint_due = false;    // every rank agreed: a timed checkpoint is due after this step
  double wall_seconds() const { return end_s - begin_s; }
  double data_wait_seconds() const { return data_ready_s - begin_s; }
};

// One step. The loader must have an epoch started (start_epoch) with a batch left. After the
// gradient allreduce every rank agrees (one small allreduce) on a stop signal, a due timed
// checkpoint and a non-finite loss or gradient; the last throws NonFiniteError on every rank,
// naming the step and the first non-finite parameter, before the optimizer touches the weights.
StepRecord train_step(Run& run);

}  // namespace nostrum::train
