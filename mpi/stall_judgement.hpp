// The stall watchdog's judgement, a pure function of what the watching rank knows: has the job
// stalled (a rank waited in a collective, or went silent, past the timeout), which ranks did not
// arrive and why, and the message that names them. No MPI, no clock: unit-tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::mpi {

// One rank as the watching rank sees it now.
struct WatchedRank {
  int rank = 0;
  int64_t step = 0;        // the step it was last seen at
  int64_t waited_ms = -1;  // how long it has waited in a collective until now; -1: not waiting
  int64_t silent_ms = 0;   // since its last heartbeat (0 for the watching rank itself)
};

struct StallLimits {
  int64_t timeout_ms = 600000;  // --stall-timeout
  int64_t silent_ms = 5000;     // a rank silent this long is named stopped, dead or unreachable
};

// What the watching rank knows: itself and the peers it watches (rank 0 watches every rank, the
// others rank 0), leaving peers excluded.
struct WatchView {
  WatchedRank self;
  std::vector<WatchedRank> peers;
};

// Rank 0 judges on its own wait and every peer's wait or silence; the others on rank 0's silence,
// or on a wait of their own so long that rank 0's verdict (the one naming every rank) should have
// come (timeout + silent).
bool stall_detected(const WatchView& view, const StallLimits& limits);

struct MissingRank {
  int rank = 0;
  int64_t step = 0;
  std::string why;
};

struct StallVerdict {
  int64_t wait_step = -1;            // the step the waiting ranks have reached; -1: none waits
  std::vector<MissingRank> missing;  // the ranks that did not arrive, self first
  std::vector<int> waiting;          // the ranks waiting in the collective, self first
};

StallVerdict judge_stall(const WatchView& view, const StallLimits& limits);

// Whether the watcher itself did not run between two polls for longer than limits.silent_ms
// (stopped and continued, or descheduled): it saw nothing in that gap, so its peers' silence over
// it is not theirs. Such a watcher judges again after limits.silent_ms more (time for the peers'
// queued heartbeats to arrive); without the rule a rank 0 continued after a SIGSTOP named the
// healthy ranks silent.
bool watcher_paused(int64_t previous_poll_ms, int64_t now_ms, const StallLimits& limits);

// The abort message of the rank `watcher` (timeout in seconds as the user gave it).
std::string stall_message(const StallVerdict& verdict, int watcher, double timeout_seconds,
                          int exit_status);

}  // namespace nostrum::mpi
