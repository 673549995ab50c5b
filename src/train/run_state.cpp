// RunState: the names of a run's statuses (one table, enum order).
#include "run_state.hpp"

namespace nostrum::train {

const std::vector<std::string>& run_status_names() {
  static const std::vector<std::string> names = {"running", "success", "aborted", "evaluated",
                                                 "checkpointed"};
  return names;
}

const char* to_string(RunStatus status) {
  return run_status_names()[static_cast<size_t>(status)].c_str();
}

}  // namespace nostrum::train
