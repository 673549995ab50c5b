// Reducer: sums small float/double vectors across a group of processes without the engine seeing
// MPI. Sync-BN hands one to batch norm (mpi/ implements it over a communicator); LocalReducer is the
// single-process identity.
#pragma once

#include <cstddef>

namespace nostrum {

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual void sum(double* data, size_t count) = 0;  // in place, elementwise over the group
  virtual int group_size() const = 0;
};

class LocalReducer final : public Reducer {
 public:
  void sum(double*, size_t) override {}
  int group_size() const override { return 1; }
};

}  // namespace nostrum
