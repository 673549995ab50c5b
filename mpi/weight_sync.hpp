// Identical weights on every rank: broadcast a float arena from rank 0 and verify it with a 64-bit
// checksum of its bytes gathered from every rank; average an arena (batch-norm running statistics)
// over the ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mpi/communicator.hpp"

namespace nostrum::mpi {

// Collective. Every rank's checksum (nostrum::hash_bytes, core/hash.hpp) of data (count floats) is
// gathered on every rank; when one differs from rank 0's, throws MpiError on every rank naming the
// differing ranks and `what`. Returns the common checksum.
uint64_t verify_identical(const Communicator& comm, const float* data, size_t count,
                          const std::string& what);

// Collective. weights: in (count) on rank 0, out (count) on the others; then verify_identical.
uint64_t broadcast_weights(const Communicator& comm, float* weights, size_t count);

// Collective. data (count): in, each rank's values; out, their mean over the ranks, summed in
// double and rounded once, then rank 0's result broadcast so every rank holds the same bits
// (an allreduce alone does not promise that for non-power-of-two rank counts). Values that are
// equal on every rank (num_batches_tracked) come back unchanged.
void average_over_ranks(const Communicator& comm, float* data, size_t count);

}  // namespace nostrum::mpi
