// MpiReducer: a split communicator per group of consecutive ranks; sum() is one MPI_Allreduce.
#include "mpi/mpi_reducer.hpp"

#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

int checked_group_size(const Communicator& world, int group_size) {
  const int size = world.size();
  if (group_size == 0) return size;
  if (group_size < 1 || group_size > size || size % group_size != 0)
    throw OptionError("sync-BN group size " + std::to_string(group_size) +
                          " must be between 1 and the rank count " + std::to_string(size) +
                          " and divide it",
                      "--sync-bn-group", "use 0 (all ranks) or a divisor of the rank count");
  return group_size;
}

MPI_Comm split_handle(const Communicator& world, int group_size) {
  return world.split(world.rank() / checked_group_size(world, group_size), world.rank()).handle();
}

}  // namespace

MpiReducer::MpiReducer(const Communicator& world, int group_size)
    : comm_(split_handle(world, group_size)),
      group_(comm_),
      group_index_(world.rank() / checked_group_size(world, group_size)) {}

MpiReducer::~MpiReducer() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiReducer::sum(double* data, size_t count) {
  if (group_.size() > 1 && count > 0) group_.allreduce_sum(data, count);
}

bool MpiReducer::concurrent_use_allowed() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  return level >= MPI_THREAD_MULTIPLE;
}

}  // namespace nostrum::mpi
