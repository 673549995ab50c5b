// Checkpointing, preemption and failures for a Run: the stop signals (SIGTERM, SIGUSR1 only set a
// flag), the per-step agreement of every rank on "stop", "checkpoint due" and "non-finite" (one
// 3-integer allreduce), the non-finite check naming the first parameter, and the Run <-> checkpoint
// state mapping (capture on every rank, write on rank 0; find, read and restore on every rank).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "io/checkpoint.hpp"
#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"
#include "run.hpp"

namespace nostrum::train {

// The loss or a gradient became NaN or Inf (every rank throws it at the same step).
class NonFiniteError : public DataError {
  using DataError::DataError;
};

// SIGTERM and SIGUSR1 set a flag (async-signal-safe) and nothing else; idempotent.
void install_stop_signal_handlers();
// The signal received (SIGTERM or SIGUSR1), or 0. For tests: raise_stop_flag(sig) sets it.
int stop_signal_received();
void raise_stop_flag(int signal_number);
// --debug-hold-at-step / --debug-hold-at-end. Collective: every rank waits, polling every 20 ms
// with one MAX allreduce (inside a stall-watchdog wait when watchdog is given), until some rank
// has got a stop signal; rank 0 first prints "debug: holding <where> until a stop signal". An
// Error after 600 s without one (a test that forgot to send it ends instead of hanging).
void hold_until_stop_signal(const mpi::Communicator& world, const std::string& where,
                            mpi::StallWatchdog* watchdog = nullptr);

// What every rank agrees on at a step boundary (a MAX allreduce of three integers).
struct StepAgreement {
  bool stop = false;            // some rank got a stop signal
  bool checkpoint_due = false;  // rank 0's clock says a timed checkpoint is due
  bool nonfinite = false;       // some rank's loss, or the gradients, are not finite
};
StepAgreement agree(const mpi::Communicator& world, bool stop, bool checkpoint_due, bool nonfinite);

// True when every value of data (count floats) is finite (OpenMP-parallel read).
bool all_finite(const float* data, size_t count);
// "parameter 'layer1.0.conv1.weight' (its value)" or "(its gradient)": the first parameter in the
// model's forward order whose value, or else gradient, holds a NaN or Inf; empty when none.
std::string first_nonfinite(const ParameterTable& table);

// The identity a checkpoint must match to be resumed by this run.
io::CheckpointIdentity run_identity(const Run& run);
// The hash (core/hash.hpp) of the dataset's manifest.txt (its identity: splits, shards, counts,
// classes).
std::string manifest_identity(const std::string& data_dir);

// Collective: every rank's BN buffers are gathered to rank 0. The state of the run as it stands
// (after state.step_in_epoch steps of state.epoch): every field of the table (run_state.hpp) of
// run.state and of mark (the run's ranks, time-to-solution so far, MLPerf log size), the
// evaluations, model and optimizer. epoch_closed: the epoch's end, evaluation and log lines are
// done, so it is saved as the next epoch at step 0; otherwise (a signal or timed checkpoint, even
// after an epoch's last step) the resumed run closes the epoch itself.
io::CheckpointState capture_checkpoint(Run& run, const CheckpointMark& mark, bool epoch_closed);

// The run's state and mark in a checkpoint, read through the same field table; DataError naming
// the checkpoint and the field it lacks.
struct SavedRun {
  RunState state;
  CheckpointMark mark;
};
SavedRun saved_run(const io::CheckpointState& state, const std::string& path);

// Collective: rank 0 writes (atomically, pruning to --keep-checkpoints); every rank learns the
// outcome and throws the same IoError when it failed. Returns the path.
std::string write_run_checkpoint(Run& run, const io::CheckpointState& state);

// Collective: which checkpoint to resume (--resume: the newest valid one in --checkpoint-dir;
// --resume-from: that file), chosen by rank 0, read and verified on every rank. Empty path: start
// afresh (--resume found none). `say` gets rank 0's report (each refused file and why).
struct ResumePoint {
  std::string path;
  io::CheckpointState state;
};
ResumePoint find_resume_point(const Run& run, const std::function<void(const std::string&)>& say);

// Every rank: the model, BN buffers (this rank's own when the rank count is the same, else the
// average over the saved ranks), the optimizer state and steps, and run.state (saved_run).
// Returns the checkpoint's mark (ranks, seconds spent, MLPerf log bytes).
CheckpointMark restore_checkpoint(Run& run, const io::CheckpointState& state,
                                  const std::string& path);

}  // namespace nostrum::train
