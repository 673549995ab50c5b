// StallWatchdog: ends a job that a stalled rank (stopped, stuck in I/O, deadlocked) would hang. A
// heartbeat thread per rank, on a duplicated communicator with its own tag, exchanges a 24-byte
// message (step, how long this rank has waited in a collective, leaving) with rank 0 once a second;
// rank 0 watches every rank and every other rank watches rank 0. When a rank has waited in a
// collective, or a rank has sent no heartbeat, for longer than the timeout, the watching rank
// prints which ranks did not arrive and the step each was last seen at, and calls MPI_Abort. A
// stopped process stops all its threads, so a stall is always seen by another rank. The main thread
// only stores two atomics per step (see begin_wait/end_wait): nothing measurable.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "mpi/communicator.hpp"

namespace nostrum::mpi {

// The exit status of a job the watchdog aborted (MPI_Abort's error code; mpirun returns it).
constexpr int kStallExitStatus = 4;

struct StallWatchdogOptions {
  // Seconds a rank may wait in one collective (or go without a heartbeat) before the job is
  // aborted. Must exceed the slowest step, evaluation or checkpoint write of the run.
  double timeout_seconds = 600.0;
  double heartbeat_seconds = 1.0;  // between heartbeats
  // Called with the message instead of printing it and calling MPI_Abort (tests); may return.
  std::function<void(const std::string&)> on_stall;
};

class StallWatchdog {
 public:
  // Collective over comm (duplicates it). Needs MPI_THREAD_MULTIPLE (the heartbeat thread calls MPI
  // while the main and communication threads do); with less, or one rank, it is disabled and
  // note() says why. OptionError for a timeout <= 0.
  StallWatchdog(const Communicator& comm, int thread_level, StallWatchdogOptions options);
  // Tells the watching ranks this one is leaving, then stops the thread (not collective).
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  bool enabled() const { return enabled_; }
  const std::string& note() const { return note_; }

  // Main thread: the step it is on (0-based, since the run began). Two relaxed atomic stores.
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // Main thread: it is about to block in (or has left) a collective every rank must reach.
  void begin_wait();
  void end_wait() { waiting_since_ms_.store(-1, std::memory_order_relaxed); }

  // RAII form of begin_wait/end_wait.
  class Wait {
   public:
    explicit Wait(StallWatchdog* watchdog) : w_(watchdog) {
      if (w_) w_->begin_wait();
    }
    ~Wait() {
      if (w_) w_->end_wait();
    }
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

   private:
    StallWatchdog* w_;
  };

 private:
  void loop();
  // How long the main thread has waited in the current collective at `now`; -1: not waiting.
  int64_t waited_ms(int64_t now) const;
  // Prints the message and aborts the job (or hands it to options_.on_stall).
  void report_stall(const std::string& message) const;
  static int64_t now_ms();

  StallWatchdogOptions options_;
  bool enabled_ = false;
  std::string note_;
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;  // owned duplicate: only the heartbeat thread uses it
  std::atomic<int64_t> step_{0};
  std::atomic<int64_t> waiting_since_ms_{-1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace nostrum::mpi
