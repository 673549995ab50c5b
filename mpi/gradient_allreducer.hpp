// GradientAllreducer: sums the gradient arena over all ranks bucket by bucket (see bucket_plan.hpp)
// with blocking MPI_Allreduce(SUM) on a dedicated communication thread and a duplicated
// communicator, while backward is still running. The arena is reduced in place: no copies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpi/bucket_plan.hpp"
#include "mpi/communicator.hpp"

namespace nostrum::mpi {

enum class OverlapMode {
  kOverlap,      // communication thread reduces a bucket as soon as backward marks it ready
  kSynchronous,  // finish_step reduces every bucket on the calling thread (after backward)
};

// One step's (or, summed with +=, one epoch's) communication time.
struct AllreduceTimings {
  double allreduce_seconds = 0.0;  // time inside MPI_Allreduce, summed over buckets
  double exposed_seconds = 0.0;    // time the main thread waited for it (in finish_step)
  double hidden_seconds = 0.0;     // allreduce_seconds - exposed_seconds (>= 0): overlapped
  size_t bytes = 0;                // bytes reduced per rank
  AllreduceTimings& operator+=(const AllreduceTimings& other);
};

// When bucket b became ready, and its allreduce started and ended, in seconds since begin_step
// (steady clock; -1 when it did not happen). For tests and the --trace timeline.
struct BucketEvent {
  double ready = -1.0;
  double start = -1.0;
  double end = -1.0;
};

// The mode a GradientAllreducer runs in, given the requested one and MPI's provided thread level:
// overlap needs MPI_THREAD_SERIALIZED (only one thread inside MPI at a time: the main thread makes
// no MPI call between begin_step and finish_step), or MPI_THREAD_MULTIPLE when the main thread does
// call MPI meanwhile (sync-BN). Below that, kSynchronous; note (if given) says why, in words.
OverlapMode effective_overlap_mode(OverlapMode requested, int thread_level,
                                   bool main_thread_calls_mpi, std::string* note = nullptr);

class GradientAllreducer {
 public:
  // grad_arena: in/out (count floats), the gradient arena in forward order; it must outlive this.
  // Duplicates comm (collective: every rank of comm constructs together). Thread levels: overlap
  // needs MPI_THREAD_SERIALIZED when the main thread makes no MPI call between begin_step and
  // finish_step, and MPI_THREAD_MULTIPLE when it does (main_thread_calls_mpi, e.g. sync-BN's
  // Reducer during backward). With less, the mode falls back to kSynchronous and mode_note() says
  // why.
  GradientAllreducer(const Communicator& comm, float* grad_arena, size_t count,
                     double bucket_mb = 25.0, double first_bucket_mb = 1.0,
                     OverlapMode mode = OverlapMode::kOverlap, bool main_thread_calls_mpi = false);
  ~GradientAllreducer();
  GradientAllreducer(const GradientAllreducer&) = delete;
  GradientAllreducer& operator=(const GradientAllreducer&) = delete;

  // Starts a step: every gradient is "not ready". Call before backward writes any gradient.
  void begin_step();
  // From backward (main thread), after each layer: every gradient at offsets >= ready_from is
  // final. The watermark only decreases within a step; a larger value is ignored. Cheap: a short
  // lock, and a wake-up only when a bucket becomes ready.
  void on_ready(size_t ready_from);
  // Marks everything ready (backward is over), waits until every bucket is summed and returns the
  // step's timings. Rethrows an MpiError raised on the communication thread.
  AllreduceTimings finish_step();

  OverlapMode mode() const { return mode_; }  // the effective mode
  const std::string& mode_note() const { return mode_note_; }
  int thread_level() const { return thread_level_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Events of the last finished step, one per bucket in reduction order.
  const std::vector<BucketEvent>& bucket_events() const { return events_; }
  // Within a step: waits until buckets [0, buckets) are summed, at most timeout_seconds; false on
  // timeout. For tests that check the overlap by this event instead of by sleeping.
  bool wait_until_reduced(size_t buckets, double timeout_seconds);

 private:
  using Clock = std::chrono::steady_clock;
  double seconds_since_start() const;
  void communication_loop();
  void reduce_bucket(size_t b);  // allreduce of bucket b, records its event and time

  float* arena_;  // (count_) gradients, reduced in place
  size_t count_;
  std::vector<Bucket> buckets_;
  std::vector<BucketEvent> events_;
  OverlapMode mode_;
  std::string mode_note_;
  int thread_level_ = 0;
  MPI_Comm duplicate_ = MPI_COMM_NULL;  // owned; only the allreducer communicates on it
  Communicator reduce_comm_;

  std::mutex mutex_;
  std::condition_variable work_cv_;  // wakes the communication thread
  std::condition_variable done_cv_;  // wakes finish_step
  // wakes wait_until_reduced after each bucket (its own, so finish_step is not woken per bucket)
  std::condition_variable reduced_cv_;
  Clock::time_point step_start_;
  unsigned long long step_ = 0;  // generation counter, incremented by begin_step
  size_t watermark_ = 0;         // gradients at offsets >= watermark_ are final
  size_t ready_buckets_ = 0;     // buckets [0, ready_buckets_) are ready
  size_t reduced_buckets_ = 0;   // buckets [0, reduced_buckets_) are summed
  bool in_step_ = false;
  bool done_ = true;
  bool stop_ = false;
  double allreduce_seconds_ = 0.0;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace nostrum::mpi
