// A deliberately failing test, hidden from normal runs: only the last rank fails an assertion.
// CTest runs it alone and expects the whole mpiexec run to fail (WILL_FAIL), proving the harness.
#include <mpi.h>
#include <catch2/catch.hpp>

TEST_CASE("a failing assertion on one rank fails the run", "[.][rank-failure-demo]") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(rank != size - 1);
}
