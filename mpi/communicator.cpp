// MPI wrapper: errors returned (not aborted) and turned into MpiError; large buffers chunked.
#include "mpi/communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

int world_rank() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int rank = -1;
  if (initialised) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX);

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) {
    MPI_Query_thread(&thread_level_);
    return;
  }
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_);
  if (code != MPI_SUCCESS) throw MpiError("MPI_Init_thread failed", "rank ?");
  owns_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owns_ && !finalised) MPI_Finalize();
}

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

void Communicator::check(int code, const char* call) const {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(std::string(call) + " failed: " + std::string(text, length),
                 "rank " + std::to_string(world_rank()));
}

void Communicator::barrier() const {
  check(MPI_Barrier(comm_), "MPI_Barrier");
}

void Communicator::broadcast(float* data, size_t count, int root) const {
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kMaxChunk, count - done);
    check(MPI_Bcast(data + done, static_cast<int>(n), MPI_FLOAT, root, comm_), "MPI_Bcast");
    done += n;
  }
}

void Communicator::broadcast(std::string& text, int root) const {
  long long length = static_cast<long long>(text.size());
  check(MPI_Bcast(&length, 1, MPI_LONG_LONG, root, comm_), "MPI_Bcast");
  text.resize(static_cast<size_t>(length));
  if (length > 0)
    check(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm_), "MPI_Bcast");
}

#define NOSTRUM_ALLREDUCE_SUM(T, MPI_T)                                                           \
  void Communicator::allreduce_sum(T* data, size_t count) const {                                 \
    for (size_t done = 0; done < count;) {                                                        \
      const size_t n = std::min(kMaxChunk, count - done);                                         \
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_T, MPI_SUM, comm_), \
            "MPI_Allreduce");                                                                     \
      done += n;                                                                                  \
    }                                                                                             \
  }
NOSTRUM_ALLREDUCE_SUM(float, MPI_FLOAT)
NOSTRUM_ALLREDUCE_SUM(double, MPI_DOUBLE)
NOSTRUM_ALLREDUCE_SUM(int64_t, MPI_INT64_T)
#undef NOSTRUM_ALLREDUCE_SUM

double Communicator::allreduce_max(double value) const {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce");
  return value;
}

double Communicator::allreduce_min(double value) const {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MIN, comm_), "MPI_Allreduce");
  return value;
}

void Communicator::allreduce_max(int* data, size_t count) const {
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(kMaxChunk, count - done);
    check(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_INT, MPI_MAX, comm_),
          "MPI_Allreduce");
    done += n;
  }
}

void Communicator::gather(const float* send, size_t count, float* recv, int root) const {
  if (count > kMaxChunk)
    throw MpiError("gather of " + std::to_string(count) + " floats per rank exceeds INT_MAX",
                   "rank " + std::to_string(world_rank()));
  const int n = static_cast<int>(count);
  check(MPI_Gather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, root, comm_), "MPI_Gather");
}

std::vector<uint64_t> Communicator::allgather(uint64_t mine) const {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  check(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_), "MPI_Allgather");
  return all;
}

std::vector<std::string> Communicator::gather_strings(const std::string& mine, int root) const {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(size_);
  check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm_), "MPI_Gather");
  std::vector<int> offsets(size_, 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(rank_ == root ? total : 0), '\0');
  check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                    MPI_CHAR, root, comm_),
        "MPI_Gatherv");
  std::vector<std::string> result;
  if (rank_ == root)
    for (int r = 0; r < size_; ++r) result.push_back(all.substr(offsets[r], lengths[r]));
  return result;
}

Communicator Communicator::split(int colour, int key) const {
  MPI_Comm sub;
  check(MPI_Comm_split(comm_, colour, key, &sub), "MPI_Comm_split");
  return Communicator(sub);
}

void Communicator::abort(int code) const {
  MPI_Abort(comm_, code);
  std::abort();  // MPI_Abort does not return; should it, the process still ends
}

int Communicator::thread_level() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level;
}

}  // namespace nostrum::mpi
