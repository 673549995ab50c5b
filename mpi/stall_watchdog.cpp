// Stall watchdog (see stall_watchdog.hpp): the heartbeat thread (sending and taking heartbeats,
// leaving) around the stall judgement (stall_judgement.cpp).
#include "mpi/stall_watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <vector>

#include "mpi/stall_judgement.hpp"
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

// Rank 0 watches every other rank; every other rank watches rank 0. Each gets a receive posted.
std::vector<Peer> watched_peers(int rank, int size, MPI_Comm comm, int64_t now) {
  std::vector<Peer> peers;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) peers.push_back(Peer{r});
  } else {
    peers.push_back(Peer{0});
  }
  for (Peer& p : peers) {
    p.last_seen_ms = now;
    MPI_Irecv(p.buffer_in, kFields, MPI_INT64_T, p.rank, kTag, comm, &p.recv);
  }
  return peers;
}

// One heartbeat to every peer whose previous one has left (a send still in flight skips a beat).
void send_beats(std::vector<Peer>& peers, MPI_Comm comm, int64_t step, int64_t waited_ms,
                bool leaving) {
  for (Peer& p : peers) {
    if (p.send != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&p.send, &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    p.buffer_out[0] = step;
    p.buffer_out[1] = waited_ms;
    p.buffer_out[2] = leaving ? 1 : 0;
    MPI_Isend(p.buffer_out, kFields, MPI_INT64_T, p.rank, kTag, comm, &p.send);
  }
}

// Takes every heartbeat that has arrived; a peer that says it is leaving gets no new receive.
void take_beats(std::vector<Peer>& peers, MPI_Comm comm, int64_t now) {
  for (Peer& p : peers) {
    while (p.recv != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&p.recv, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      p.last_seen_ms = now;
      p.step = p.buffer_in[0];
      p.waited_ms = p.buffer_in[1];
      p.leaving = p.buffer_in[2] != 0;
      if (!p.leaving) MPI_Irecv(p.buffer_in, kFields, MPI_INT64_T, p.rank, kTag, comm, &p.recv);
    }
  }
}

// Waits up to half a second for a send to complete, then lets it complete on its own.
void settle_send(Peer& p) {
  for (int i = 0; i < 50 && p.send != MPI_REQUEST_NULL; ++i) {
    int done = 0;
    MPI_Test(&p.send, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (p.send != MPI_REQUEST_NULL) MPI_Request_free(&p.send);
}

// Leaving: tells the watchers, so that a rank finishing later is not taken for a stalled one. A
// peer that stopped receiving cannot complete a small (eager) send's delivery, but the send
// completes locally; the waits are bounded anyway.
void say_goodbye(std::vector<Peer>& peers, MPI_Comm comm, int64_t step, int64_t waited_ms) {
  for (Peer& p : peers) settle_send(p);
  send_beats(peers, comm, step, waited_ms, true);
  for (Peer& p : peers) {
    settle_send(p);
    if (p.recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&p.recv);
      MPI_Wait(&p.recv, MPI_STATUS_IGNORE);
    }
  }
}

// The watching rank's view at `now`: itself and its peers that are not leaving.
WatchView watch_view(int rank, int64_t step, int64_t waited_ms, const std::vector<Peer>& peers,
                     int64_t now) {
  WatchView view;
  view.self = {rank, step, waited_ms, 0};
  for (const Peer& p : peers) {
    if (p.leaving) continue;
    const int64_t age = now - p.last_seen_ms;
    view.peers.push_back({p.rank, p.step, p.waited_ms >= 0 ? p.waited_ms + age : -1, age});
  }
  return view;
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

int64_t StallWatchdog::waited_ms(int64_t now) const {
  const int64_t since = waiting_since_ms_.load(std::memory_order_relaxed);
  return since >= 0 ? now - since : -1;
}

void StallWatchdog::loop() {
  const int64_t start = now_ms();
  std::vector<Peer> peers = watched_peers(rank_, size_, comm_, start);
  StallLimits limits;
  limits.timeout_ms = static_cast<int64_t>(options_.timeout_seconds * 1000.0);
  const int64_t beat_ms =
      std::max<int64_t>(1, static_cast<int64_t>(options_.heartbeat_seconds * 1000));
  limits.silent_ms = std::min<int64_t>(limits.timeout_ms, std::max<int64_t>(5000, 5 * beat_ms));
  const int64_t poll_ms = std::min<int64_t>(200, beat_ms);
  int64_t next_beat = start, previous_poll = start, judge_from = start;
  bool fired = false;
  while (!stop_.load()) {
    const int64_t now = now_ms();
    if (watcher_paused(previous_poll, now,
                       limits)) {  // it did not listen: the peers were not silent
      judge_from = now + limits.silent_ms;
      for (Peer& p : peers) p.last_seen_ms = now;
    }
    previous_poll = now;
    if (now >= next_beat) {
      send_beats(peers, comm_, step_.load(std::memory_order_relaxed), waited_ms(now), false);
      next_beat = now + beat_ms;
    }
    take_beats(peers, comm_, now);
    if (!fired && now >= judge_from) {
      const WatchView view =
          watch_view(rank_, step_.load(std::memory_order_relaxed), waited_ms(now), peers, now);
      if (stall_detected(view, limits)) {
        fired = true;
        report_stall(stall_message(judge_stall(view, limits), rank_, options_.timeout_seconds,
                                   kStallExitStatus));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  say_goodbye(peers, comm_, step_.load(std::memory_order_relaxed), waited_ms(now_ms()));
}

void StallWatchdog::report_stall(const std::string& message) const {
  if (options_.on_stall) {
    options_.on_stall(message);
    return;
  }
  std::cerr << "nostrum: error: " << message << std::endl;
  MPI_Abort(MPI_COMM_WORLD, kStallExitStatus);
}

}  // namespace nostrum::mpi
