// Weight broadcast, checksum verification (MPI_Allgather of one uint64 per rank), averaging.
#include "mpi/weight_sync.hpp"

#include <cstring>
#include <vector>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

uint64_t checksum_bytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t hash = 0xcbf29ce484222325ULL ^ bytes;
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    hash = (hash ^ word) * kPrime;
    hash ^= hash >> 29;
  }
  for (; i < bytes; ++i) hash = (hash ^ p[i]) * kPrime;
  hash ^= hash >> 33;  // final avalanche (murmur3 fmix64)
  hash *= 0xff51afd7ed558ccdULL;
  hash ^= hash >> 33;
  hash *= 0xc4ceb9fe1a85ec53ULL;
  hash ^= hash >> 33;
  return hash;
}

uint64_t verify_identical(const Communicator& comm, const float* data, size_t count,
                          const std::string& what) {
  const uint64_t mine = checksum_bytes(data, count * sizeof(float));
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  const int code =
      MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm.handle());
  if (code != MPI_SUCCESS)
    throw MpiError("MPI_Allgather of the " + what + " checksums failed",
                   "rank " + std::to_string(comm.rank()));
  std::string differing;
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (!differing.empty())
    throw MpiError(what + " differ between ranks: rank(s) " + differing +
                       " do not match rank 0 (checksum of " + std::to_string(count) + " floats)",
                   "rank " + std::to_string(comm.rank()),
                   "every rank must start from identical weights; was the broadcast skipped?");
  return all[0];
}

uint64_t broadcast_weights(const Communicator& comm, float* weights, size_t count) {
  comm.broadcast(weights, count, 0);
  return verify_identical(comm, weights, count, "initial weights");
}

void average_over_ranks(const Communicator& comm, float* data, size_t count) {
  if (comm.size() == 1 || count == 0) return;
  std::vector<double> sum(data, data + count);
  comm.allreduce_sum(sum.data(), count);
  const double ranks = comm.size();
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(sum[i] / ranks);
  comm.broadcast(data, count, 0);
}

}  // namespace nostrum::mpi
