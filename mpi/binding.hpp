// Binding report: each rank's host, the cores it may run on (its affinity mask, or the union of its
// OpenMP places under OMP_PROC_BIND) and its OpenMP threads; rank 0 gathers them into a table and
// warns when a host or a rank is oversubscribed.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "mpi/communicator.hpp"

namespace nostrum::mpi {

struct RankBinding {
  int rank = 0;
  std::string host;
  std::vector<int> cores;  // CPU ids this rank may run on, ascending
  int omp_threads = 1;     // omp_get_max_threads()
  int host_cpus = 0;       // online CPUs of the host (sysconf)
};

struct BindingReport {
  std::string table;                  // one line per rank, aligned columns
  std::vector<std::string> warnings;  // oversubscription, one sentence each
};

// This process's binding (the calling thread's affinity mask).
RankBinding local_binding(int rank);
// "0-3,8,10-11" for {0,1,2,3,8,10,11}; "" for none.
std::string format_core_list(const std::vector<int>& cores);
// Table and warnings for bindings of any ranks (pure; no MPI). Warns when on a host the ranks'
// threads exceed its CPUs, when they exceed the cores their masks allow together (ranks pinned on
// top of each other), and when one rank's threads exceed its own mask.
BindingReport make_binding_report(const std::vector<RankBinding>& bindings);
// Collective: every rank's local_binding, in rank order on root (empty elsewhere).
std::vector<RankBinding> gather_bindings(const Communicator& comm, int root = 0);
// Collective: gathers and, on rank 0, writes the table and the warnings ("warning: ...") to out.
// Returns the report on rank 0 (empty elsewhere).
BindingReport print_binding_report(const Communicator& comm, std::ostream& out);

}  // namespace nostrum::mpi
