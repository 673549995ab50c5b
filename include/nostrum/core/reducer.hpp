// Reducer: sums small double vectors across a group of processes without the engine seeing MPI.
// Sync-BN hands one to batch norm (mpi/ implements it over a communicator); without one, batch
// norm uses this process's statistics.
#pragma once

#include <cstddef>

namespace nostrum {

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual void sum(double* data, size_t count) = 0;  // in place, elementwise over the group
  virtual int group_size() const = 0;
};

}  // namespace nostrum
