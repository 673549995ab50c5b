// MpiReducer: nostrum::Reducer (sync-BN statistics) over groups of G consecutive ranks of a
// communicator (rank r is in group r / G; G = all ranks by default), on its own communicator.
#pragma once

#include <cstddef>

#include "mpi/communicator.hpp"
#include "nostrum/core/reducer.hpp"

namespace nostrum::mpi {

class MpiReducer final : public Reducer {
 public:
  // Collective over world. group_size 0 means all ranks; otherwise 1 <= G <= world.size() and G
  // must divide world.size() (equal groups, so every rank normalises by the same count), else
  // OptionError naming --sync-bn-group. The split communicator is this reducer's alone, so it may
  // be called from the main thread while a GradientAllreducer's thread reduces gradients on
  // another communicator; that concurrent use needs MPI_THREAD_MULTIPLE (see
  // concurrent_use_allowed()).
  explicit MpiReducer(const Communicator& world, int group_size = 0);
  ~MpiReducer() override;
  MpiReducer(const MpiReducer&) = delete;
  MpiReducer& operator=(const MpiReducer&) = delete;

  void sum(double* data, size_t count) override;  // data: in/out (count), summed over the group
  int group_size() const override { return group_.size(); }
  int group_index() const { return group_index_; }
  // True when MPI provides MPI_THREAD_MULTIPLE: sum() may then run while another thread is inside
  // MPI (the gradient communication thread).
  static bool concurrent_use_allowed();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;  // owned
  Communicator group_;
  int group_index_ = 0;
};

}  // namespace nostrum::mpi
