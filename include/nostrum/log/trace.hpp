// TraceWriter: a per-rank Chrome-trace timeline (opens in Perfetto / chrome://tracing). Events
// (name, category, phase B/E/i, thread id, time) are appended into a buffer preallocated at
// construction (lock-free, any thread) and written as JSON at the end or on demand. Disabled
// tracing is a null TraceWriter pointer: callers test it and do nothing else (TraceScope does that
// for them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::log {

class TraceWriter {
 public:
  // `rank` becomes the trace's pid; `capacity` events are allocated now. Further events are
  // counted as dropped (reported in the file), never reallocated.
  TraceWriter(int rank, size_t capacity);

  // `name` and `category` must outlive the writer (string literals, or names held by the parameter
  // table / layer list); they are stored as pointers. `thread` is our thread id (0 = main,
  // 1 = communication thread, 2+ = loaders, by convention).
  void begin(const char* name, const char* category, int thread) {
    append(name, category, 'B', thread);
  }
  void end(const char* name, const char* category, int thread) {
    append(name, category, 'E', thread);
  }
  void instant(const char* name, const char* category, int thread) {
    append(name, category, 'i', thread);
  }
  // A span that already happened, with begin/end in seconds of the monotonic clock (what
  // omp_get_wtime() and std::chrono::steady_clock read on Linux): per-layer timings reported after
  // the fact by the model's LayerObserver.
  void span(const char* name, const char* category, int thread, double start_s, double end_s);
  void instant_at(const char* name, const char* category, int thread, double time_s);
  // Names a thread in the viewer ("main", "allreduce", ...); stored like event names.
  void name_thread(int thread, const char* name);

  // Writes every event recorded so far as {"traceEvents": [...]}; throws IoError naming the path.
  // Safe while other threads append (events completed before the call are written).
  void write(const std::string& path) const;

  size_t size() const;  // events recorded (not counting dropped ones)
  size_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  int rank() const { return rank_; }

  // "trace.json" -> "trace.rank3.json": one file per rank from one --trace option.
  static std::string path_for_rank(const std::string& path, int rank);

 private:
  struct Event {
    const char* name;
    const char* category;
    int64_t time_ns;  // since the writer was made
    int thread;
    char phase;
    std::atomic<bool> ready{false};
  };
  void append(const char* name, const char* category, char phase, int thread);
  void append_at(const char* name, const char* category, char phase, int thread, int64_t time_ns);

  int rank_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Event> events_;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> dropped_{0};
  std::vector<std::pair<int, const char*>> thread_names_;
};

// Begin on construction, end on destruction; nothing at all when the writer is null.
class TraceScope {
 public:
  TraceScope(TraceWriter* trace, const char* name, const char* category, int thread = 0)
      : trace_(trace), name_(name), category_(category), thread_(thread) {
    if (trace_) trace_->begin(name_, category_, thread_);
  }
  ~TraceScope() {
    if (trace_) trace_->end(name_, category_, thread_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceWriter* trace_;
  const char* name_;
  const char* category_;
  int thread_;
};

}  // namespace nostrum::log
