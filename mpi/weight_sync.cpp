// Weight broadcast, checksum verification (an allgather of one uint64 per rank), averaging.
#include "mpi/weight_sync.hpp"

#include <vector>

#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"

namespace nostrum::mpi {

uint64_t verify_identical(const Communicator& comm, const float* data, size_t count,
                          const std::string& what) {
  const uint64_t mine = hash_bytes(data, count * sizeof(float));
  const std::vector<uint64_t> all = comm.allgather(mine);
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
