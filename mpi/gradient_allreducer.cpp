// Communication thread and bucket bookkeeping for the overlapped gradient allreduce. All shared
// state is guarded by mutex_; the thread drops the lock around each (blocking) MPI_Allreduce.
#include "mpi/gradient_allreducer.hpp"

#include <algorithm>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

MPI_Comm duplicate_of(const Communicator& comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm.handle(), &dup) != MPI_SUCCESS)
    throw MpiError("MPI_Comm_dup failed for the gradient communicator",
                   "rank " + std::to_string(comm.rank()));
  return dup;
}

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "unknown thread level";
  }
}

}  // namespace

OverlapMode effective_overlap_mode(OverlapMode requested, int thread_level,
                                   bool main_thread_calls_mpi, std::string* note) {
  std::string why;
  OverlapMode mode = requested;
  if (requested == OverlapMode::kOverlap) {
    const int needed = main_thread_calls_mpi ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    if (thread_level < needed) {
      mode = OverlapMode::kSynchronous;
      why = std::string("MPI provides ") + level_name(thread_level) + ", overlap needs " +
            level_name(needed) +
            (main_thread_calls_mpi ? " (the main thread calls MPI during backward)" : "") +
            ": gradients are reduced after backward, nothing is hidden";
    } else {
      why = std::string("overlapped on a communication thread (") + level_name(thread_level) + ")";
    }
  } else {
    why = "synchronous: gradients are reduced after backward";
  }
  if (note) *note = why;
  return mode;
}

AllreduceTimings& AllreduceTimings::operator+=(const AllreduceTimings& other) {
  allreduce_seconds += other.allreduce_seconds;
  exposed_seconds += other.exposed_seconds;
  hidden_seconds += other.hidden_seconds;
  bytes += other.bytes;
  return *this;
}

GradientAllreducer::GradientAllreducer(const Communicator& comm, float* grad_arena, size_t count,
                                       double bucket_mb, double first_bucket_mb, OverlapMode mode,
                                       bool main_thread_calls_mpi)
    : arena_(grad_arena),
      count_(count),
      buckets_(plan_buckets(count, bucket_mb, first_bucket_mb)),
      events_(buckets_.size()),
      mode_(mode),
      duplicate_(duplicate_of(comm)),
      reduce_comm_(duplicate_) {
  MPI_Query_thread(&thread_level_);
  mode_ = effective_overlap_mode(mode, thread_level_, main_thread_calls_mpi, &mode_note_);
  if (mode_ == OverlapMode::kOverlap) thread_ = std::thread([this] { communication_loop(); });
}

GradientAllreducer::~GradientAllreducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised && duplicate_ != MPI_COMM_NULL) MPI_Comm_free(&duplicate_);
}

double GradientAllreducer::seconds_since_start() const {
  return std::chrono::duration<double>(Clock::now() - step_start_).count();
}

void GradientAllreducer::begin_step() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (in_step_)
      throw MpiError("GradientAllreducer::begin_step called twice without finish_step",
                     "rank " + std::to_string(reduce_comm_.rank()));
    in_step_ = true;
    done_ = buckets_.empty();
    watermark_ = count_;
    ready_buckets_ = 0;
    reduced_buckets_ = 0;
    allreduce_seconds_ = 0.0;
    std::fill(events_.begin(), events_.end(), BucketEvent{});
    step_start_ = Clock::now();
    ++step_;
  }
  work_cv_.notify_one();
}

void GradientAllreducer::on_ready(size_t ready_from) {
  bool woke = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!in_step_ || ready_from >= watermark_) return;
    watermark_ = ready_from;
    const double now = seconds_since_start();
    while (ready_buckets_ < buckets_.size() && buckets_[ready_buckets_].offset >= ready_from) {
      events_[ready_buckets_].ready = now;
      ++ready_buckets_;
      woke = true;
    }
  }
  if (woke && mode_ == OverlapMode::kOverlap) work_cv_.notify_one();
}

void GradientAllreducer::reduce_bucket(size_t b) {
  const double start = seconds_since_start();
  reduce_comm_.allreduce_sum(arena_ + buckets_[b].offset, buckets_[b].count);
  const double end = seconds_since_start();
  events_[b].start = start;  // events_[b] is touched by no one else once bucket b is ready
  events_[b].end = end;
  allreduce_seconds_ += end - start;
}

void GradientAllreducer::communication_loop() {
  unsigned long long seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || step_ != seen; });
    if (stop_) return;
    seen = step_;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      work_cv_.wait(lock, [&] { return stop_ || ready_buckets_ > b; });
      if (stop_) return;
      lock.unlock();
      try {
        reduce_bucket(b);
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        break;
      }
      lock.lock();
      reduced_buckets_ = b + 1;
      reduced_cv_.notify_all();
    }
    done_ = true;
    done_cv_.notify_all();
    reduced_cv_.notify_all();
  }
}

bool GradientAllreducer::wait_until_reduced(size_t buckets, double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  return reduced_cv_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [&] {
    return reduced_buckets_ >= buckets || error_ != nullptr;
  }) && error_ == nullptr;
}

AllreduceTimings GradientAllreducer::finish_step() {
  const auto wait_start = Clock::now();
  on_ready(0);  // backward is over: every gradient is final
  AllreduceTimings timings;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!in_step_)
    throw MpiError("GradientAllreducer::finish_step called without begin_step",
                   "rank " + std::to_string(reduce_comm_.rank()));
  if (mode_ == OverlapMode::kSynchronous) {
    lock.unlock();
    std::exception_ptr error;
    for (size_t b = 0; b < buckets_.size() && !error; ++b) {
      try {
        reduce_bucket(b);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    error_ = error;
    reduced_buckets_ = buckets_.size();
    done_ = true;
  } else {
    done_cv_.wait(lock, [&] { return done_; });
  }
  in_step_ = false;
  timings.exposed_seconds = std::chrono::duration<double>(Clock::now() - wait_start).count();
  timings.allreduce_seconds = allreduce_seconds_;
  if (mode_ == OverlapMode::kSynchronous) timings.exposed_seconds = allreduce_seconds_;
  timings.hidden_seconds = std::max(0.0, timings.allreduce_seconds - timings.exposed_seconds);
  timings.bytes = count_ * sizeof(float);
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;
    std::rethrow_exception(error);
  }
  return timings;
}

}  // namespace nostrum::mpi
