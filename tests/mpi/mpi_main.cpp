// Catch2 main for MPI tests: every rank runs the same test cases; the run fails (under mpiexec and
// CTest) if any assertion failed on any rank. Only rank 0 reports unless a rank fails, so the
// output stays readable.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  Catch::Session session;
  int failed = session.applyCommandLine(argc, argv);
  if (failed == 0) failed = session.run();

  // A failing assertion on any one rank fails the whole run.
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0)
    std::fprintf(stderr, "[rank %d of %d] %d test case(s) failed\n", rank, size, failed);
  if (rank == 0) {
    std::printf("MPI tests on %d ranks: %s\n", size,
                any_failed ? "FAILED" : "passed on every rank");
    std::fflush(stdout);
  }
  MPI_Finalize();
  // Rank 0 alone returns the run's status: mpiexec aborts the job when a rank exits non-zero, and a
  // failing rank that exited first used to kill rank 0 before its report reached the output.
  return rank == 0 && any_failed ? 1 : 0;
}
