// Communicator: a thin wrapper over an MPI communicator (rank, size, barrier, broadcast,
// allreduce of buffers of any length, gather, abort, the thread level): the one door to MPI for
// src/train. Every failing MPI call throws MpiError naming the call and
// the rank. MpiSession owns MPI_Init_thread/MPI_Finalize for a process.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::mpi {

// Initialises MPI requesting MPI_THREAD_MULTIPLE and finalises it on destruction. One per process.
// A lower provided level is accepted: GradientAllreducer then overlaps only as far as the level
// allows (see effective_overlap_mode) and says so; thread_level() tells the driver.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int thread_level() const { return thread_level_; }

 private:
  int thread_level_ = 0;
  bool owns_ = false;
};

class Communicator {
 public:
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm handle() const { return comm_; }

  void barrier() const;
  void broadcast(float* data, size_t count, int root) const;
  void broadcast(std::string& text, int root) const;
  // In-place elementwise sum over all ranks; any length (split into INT_MAX-sized calls).
  void allreduce_sum(float* data, size_t count) const;
  void allreduce_sum(double* data, size_t count) const;
  void allreduce_sum(int64_t* data, size_t count) const;
  // In-place elementwise maximum over all ranks (flags every rank must agree on).
  void allreduce_max(int* data, size_t count) const;
  double allreduce_max(double value) const;
  double allreduce_min(double value) const;
  // Rank r's count floats land at recv + r * count on root (recv: size() x count floats there,
  // unused elsewhere). count must fit an int.
  void gather(const float* send, size_t count, float* recv, int root) const;
  // Every rank's value, in rank order, on every rank.
  std::vector<uint64_t> allgather(uint64_t mine) const;
  // Every rank's string, in rank order (for start-up binding reports).
  std::vector<std::string> gather_strings(const std::string& mine, int root) const;
  // Splits into sub-communicators of ranks with the same colour (ordered by key).
  Communicator split(int colour, int key) const;
  // Ends every process of the job with exit status `code` (MPI_Abort). Does not return.
  [[noreturn]] void abort(int code) const;

  // The thread support MPI gave this process (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  static int thread_level();

 private:
  void check(int code, const char* call) const;
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace nostrum::mpi
