// nostrum-mpi-probe: the launcher check a job runs before training. Every rank reports its MPI
// rank, the world size, its Slurm node, host, bound CPUs, OpenMP threads and IPv4 address (the
// first that is not loopback: a simulated node's own address on the local cluster); rank 0 prints
// the table in rank order. With --expect P it fails (exit 4, on every rank) when the world is not P
// ranks: what a launcher that does not speak to this MPI does (P singletons of size 1).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string bound_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!list.empty()) list += ',';
    list += last > c ? std::to_string(c) + "-" + std::to_string(last) : std::to_string(c);
    c = last;
  }
  return list;
}

std::string ipv4_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "-";
  std::string found = "-";
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::strncmp(text, "127.", 4) != 0) {
      found = text;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int expect = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--expect") == 0) expect = std::atoi(argv[i + 1]);

  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  constexpr int kLine = 256;
  char line[kLine];
  std::snprintf(line, kLine,
                "rank %d of %d on slurm node %s (host %s) cpus %s threads %s address %s", rank,
                size, env_or("SLURMD_NODENAME", "-"), host, bound_cpus().c_str(),
                env_or("OMP_NUM_THREADS", "-"), ipv4_address().c_str());
  std::vector<char> all(rank == 0 ? static_cast<size_t>(kLine) * size : 1);
  MPI_Gather(line, kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < size; ++r) std::printf("%s\n", &all[static_cast<size_t>(r) * kLine]);
  std::fflush(stdout);
  const bool wrong = expect > 0 && size != expect;
  if (wrong)
    std::fprintf(stderr,
                 "nostrum-mpi-probe: MPI world of %d rank(s), but the job has %d task(s): the "
                 "launcher does not match this MPI (srun without --mpi=pmix, or another MPI's "
                 "mpirun?); refusing to start %d separate runs\n",
                 size, expect, expect);
  MPI_Finalize();
  return wrong ? 4 : 0;
}
