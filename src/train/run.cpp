// Run: the names of a run's statuses.
#include "run.hpp"

namespace nostrum::train {

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning:
      return "running";
    case RunStatus::kSuccess:
      return "success";
    case RunStatus::kAborted:
      return "aborted";
    case RunStatus::kEvaluated:
      return "evaluated";
    case RunStatus::kCheckpointed:
      return "checkpointed";
  }
  return "running";
}

}  // namespace nostrum::train
