// The exit statuses of nostrum-train (src/train/README.md, "Exit status"), and the one for each way
// a run ends.
#pragma once

#include "mpi/stall_watchdog.hpp"
#include "run_state.hpp"

namespace nostrum::train {

constexpr int kExitSuccess = 0;       // the target was reached (or --eval-only evaluated)
constexpr int kExitError = 1;         // an error: bad option, data, file, MPI failure, ...
constexpr int kExitTargetMissed = 2;  // the epoch/step budget ran out before the target
constexpr int kExitCheckpointed = 3;  // stopped by SIGTERM/SIGUSR1 after a checkpoint: requeue
constexpr int kExitStalled = mpi::kStallExitStatus;  // 4: the stall watchdog aborted the job
constexpr int kExitNonFinite = 5;  // the loss or a gradient became NaN/Inf: the run stopped

// The exit status of a run that ended with `status` (not kRunning).
constexpr int exit_status(RunStatus status) {
  switch (status) {
    case RunStatus::kSuccess:
    case RunStatus::kEvaluated:
      return kExitSuccess;
    case RunStatus::kAborted:
      return kExitTargetMissed;
    case RunStatus::kCheckpointed:
      return kExitCheckpointed;
    case RunStatus::kRunning:
      break;
  }
  return kExitError;  // a run that has not ended has no exit status of its own
}

}  // namespace nostrum::train
