// Stall watchdog (see stall_watchdog.hpp): the heartbeat thread, rank 0's view of every rank, the
// other ranks' view of rank 0, and the abort message naming the ranks that did not arrive.
#include "mpi/stall_watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

constexpr int kTag = 7301;
constexpr int kFields = 3;  // step, waited milliseconds (-1: not waiting), leaving (0/1)

// What the watching rank knows of one peer.
struct Peer {
  int rank = 0;
  int64_t buffer_in[kFields] = {0, -1, 0};
  int64_t buffer_out[kFields] = {0, -1, 0};
  MPI_Request recv = MPI_REQUEST_NULL;
  MPI_Request send = MPI_REQUEST_NULL;
  int64_t last_seen_ms = 0;  // this rank's clock
  int64_t step = 0;
  int64_t waited_ms = -1;  // as of last_seen_ms
  bool leaving = false;
};

std::string seconds_text(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f s", ms / 1000.0);
  return text;
}

}  // namespace

int64_t StallWatchdog::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StallWatchdog::StallWatchdog(const Communicator& comm, int thread_level,
                             StallWatchdogOptions options)
    : options_(std::move(options)), rank_(comm.rank()), size_(comm.size()) {
  NOSTRUM_CHECK(options_.timeout_seconds > 0, OptionError,
                "the stall timeout must be positive seconds", "--stall-timeout");
  if (size_ < 2) {
    note_ = "stall watchdog off: one rank";
    return;
  }
  if (thread_level < MPI_THREAD_MULTIPLE) {
    note_ =
        "stall watchdog off: MPI provides no MPI_THREAD_MULTIPLE (its heartbeat thread calls "
        "MPI beside the training threads)";
    return;
  }
  const int code = MPI_Comm_dup(comm.handle(), &comm_);
  NOSTRUM_CHECK(code == MPI_SUCCESS, MpiError, "MPI_Comm_dup failed for the stall watchdog",
                "rank " + std::to_string(rank_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  enabled_ = true;
  thread_ = std::thread([this] { loop(); });
}

StallWatchdog::~StallWatchdog() {
  if (!enabled_) return;
  stop_.store(true);
  thread_.join();
  MPI_Comm_free(&comm_);
}

void StallWatchdog::begin_wait() {
  waiting_since_ms_.store(now_ms(), std::memory_order_relaxed);
}

void StallWatchdog::loop() {
  // Rank 0 watches every other rank; every other rank watches rank 0.
  std::vector<Peer> peers;
  const int64_t start = now_ms();
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) peers.push_back(Peer{r});
  } else {
    peers.push_back(Peer{0});
  }
  for (Peer& p : peers) {
    p.last_seen_ms = start;
    MPI_Irecv(p.buffer_in, kFields, MPI_INT64_T, p.rank, kTag, comm_, &p.recv);
  }
  const int64_t timeout_ms = static_cast<int64_t>(options_.timeout_seconds * 1000.0);
  const int64_t beat_ms =
      std::max<int64_t>(1, static_cast<int64_t>(options_.heartbeat_seconds * 1000));
  // A peer whose heartbeats stopped this long ago is named as stopped or dead.
  const int64_t silent_ms = std::min<int64_t>(timeout_ms, std::max<int64_t>(5000, 5 * beat_ms));
  const int64_t poll_ms = std::min<int64_t>(200, beat_ms);
  int64_t next_beat = start;
  bool fired = false;
  int64_t last_poll = start, judge_from = start;

  auto send_beats = [&](int64_t now, bool leaving) {
    const int64_t since = waiting_since_ms_.load(std::memory_order_relaxed);
    for (Peer& p : peers) {
      if (p.send != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&p.send, &done, MPI_STATUS_IGNORE);
        if (!done) continue;  // the last one is still in flight: skip this beat
      }
      p.buffer_out[0] = step_.load(std::memory_order_relaxed);
      p.buffer_out[1] = since >= 0 ? now - since : -1;
      p.buffer_out[2] = leaving ? 1 : 0;
      MPI_Isend(p.buffer_out, kFields, MPI_INT64_T, p.rank, kTag, comm_, &p.send);
    }
  };

  while (!stop_.load()) {
    const int64_t now = now_ms();
    // This rank itself did not run for longer than a silent peer may (SIGSTOP and SIGCONT, a
    // suspended job, a paused VM): what it knows of the others is stale, and so is its own wait.
    // It judges again only after a fresh timeout (seen: a stopped rank 0, woken by mpirun's
    // teardown, blamed the healthy rank that had ended the job).
    if (now - last_poll > silent_ms) {
      for (Peer& p : peers) p.last_seen_ms = now;
      judge_from = now + timeout_ms;
    }
    last_poll = now;
    if (now >= next_beat) {
      send_beats(now, false);
      next_beat = now + beat_ms;
    }
    for (Peer& p : peers) {
      for (;;) {  // take every heartbeat that has arrived
        if (p.recv == MPI_REQUEST_NULL) break;
        int done = 0;
        MPI_Test(&p.recv, &done, MPI_STATUS_IGNORE);
        if (!done) break;
        p.last_seen_ms = now;
        p.step = p.buffer_in[0];
        p.waited_ms = p.buffer_in[1];
        p.leaving = p.buffer_in[2] != 0;
        if (!p.leaving) MPI_Irecv(p.buffer_in, kFields, MPI_INT64_T, p.rank, kTag, comm_, &p.recv);
      }
    }

    if (!fired && now >= judge_from) {
      // Has anyone waited in a collective, or been silent, for longer than the timeout?
      const int64_t own_since = waiting_since_ms_.load(std::memory_order_relaxed);
      const int64_t own_waited = own_since >= 0 ? now - own_since : -1;
      const int64_t own_step = step_.load(std::memory_order_relaxed);
      // Rank 0 judges on its own wait and every peer's; the others on rank 0's silence, or on a
      // wait so long that rank 0's verdict (the one that names every rank) should have come.
      bool stalled = own_waited > (rank_ == 0 ? timeout_ms : timeout_ms + silent_ms);
      for (const Peer& p : peers) {
        if (p.leaving) continue;
        const int64_t age = now - p.last_seen_ms;
        stalled = stalled || age > timeout_ms ||
                  (rank_ == 0 && p.waited_ms >= 0 && p.waited_ms + age > timeout_ms);
      }
      if (stalled) {
        fired = true;
        // The step the waiting ranks have reached; the ranks that did not arrive at it.
        int64_t wait_step = own_waited >= 0 ? own_step : -1;
        for (const Peer& p : peers)
          if (!p.leaving && p.waited_ms >= 0) wait_step = std::max(wait_step, p.step);
        std::ostringstream missing, waiting;
        int missing_count = 0;
        auto judge = [&](int rank, int64_t step, int64_t waited, int64_t age) {
          std::string why;
          if (age > silent_ms)
            why = "no heartbeat for " + seconds_text(age) + ": stopped, dead or unreachable";
          else if (waited < 0)
            why = "not in the collective: still computing, or stuck in I/O";
          else if (step < wait_step)
            why = "waiting at an earlier step";
          if (why.empty()) {
            waiting << (waiting.tellp() > 0 ? ", " : "") << rank;
            return;
          }
          ++missing_count;
          missing << "\n  rank " << rank << " did not arrive: last seen at step " << step << " ("
                  << why << ")";
        };
        judge(rank_, own_step, own_waited, 0);
        for (const Peer& p : peers)
          if (!p.leaving)
            judge(p.rank, p.step, p.waited_ms >= 0 ? p.waited_ms + now - p.last_seen_ms : -1,
                  now - p.last_seen_ms);
        std::ostringstream message;
        message << "stall watchdog (rank " << rank_ << "): no progress for "
                << options_.timeout_seconds << " s (--stall-timeout)";
        if (wait_step >= 0) message << " at step " << wait_step;
        if (missing_count > 0)
          message << ":" << missing.str();
        else
          message << ": every watched rank is waiting (a deadlock in the collectives?)";
        if (waiting.tellp() > 0)
          message << "\n  waiting in the collective: rank(s) " << waiting.str();
        if (rank_ != 0) message << "\n  (this rank watches rank 0 only; rank 0 watches all ranks)";
        message << "\n  aborting the job with status " << kStallExitStatus;
        if (options_.on_stall) {
          options_.on_stall(message.str());
        } else {
          std::cerr << "nostrum: error: " << message.str() << std::endl;
          MPI_Abort(MPI_COMM_WORLD, kStallExitStatus);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }

  // Leaving: tell the watchers, so that a rank finishing later is not taken for a stalled one.
  for (Peer& p : peers)
    if (p.send != MPI_REQUEST_NULL) {
      // A peer that stopped receiving cannot complete a small (eager) send's delivery, but the send
      // completes locally; bound the wait anyway.
      for (int i = 0; i < 50; ++i) {
        int done = 0;
        MPI_Test(&p.send, &done, MPI_STATUS_IGNORE);
        if (done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (p.send != MPI_REQUEST_NULL) MPI_Request_free(&p.send);  // completes on its own
    }
  send_beats(now_ms(), true);
  for (Peer& p : peers) {
    for (int i = 0; i < 50 && p.send != MPI_REQUEST_NULL; ++i) {
      int done = 0;
      MPI_Test(&p.send, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (p.send != MPI_REQUEST_NULL) MPI_Request_free(&p.send);
    if (p.recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&p.recv);
      MPI_Wait(&p.recv, MPI_STATUS_IGNORE);
    }
  }
}

}  // namespace nostrum::mpi
