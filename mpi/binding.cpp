// Binding report: affinity via sched_getaffinity, gathered as "rank|host|cores|threads|cpus" text.
#include "mpi/binding.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <sstream>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

std::string encode(const RankBinding& b) {
  std::ostringstream out;
  out << b.rank << '|' << b.host << '|' << format_core_list(b.cores) << '|' << b.omp_threads << '|'
      << b.host_cpus;
  return out.str();
}

std::vector<int> parse_core_list(const std::string& text) {
  std::vector<int> cores;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int c = first; c <= last; ++c) cores.push_back(c);
  }
  return cores;
}

RankBinding decode(const std::string& text) {
  std::vector<std::string> fields;
  std::istringstream in(text);
  std::string field;
  while (std::getline(in, field, '|')) fields.push_back(field);
  if (fields.size() != 5) throw MpiError("malformed binding record '" + text + "'", "rank 0");
  RankBinding b;
  b.rank = std::stoi(fields[0]);
  b.host = fields[1];
  b.cores = parse_core_list(fields[2]);
  b.omp_threads = std::stoi(fields[3]);
  b.host_cpus = std::stoi(fields[4]);
  return b;
}

}  // namespace

RankBinding local_binding(int rank) {
  RankBinding b;
  b.rank = rank;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) b.host = host;
  if (b.host.empty()) b.host = "?";
  // Under OMP_PROC_BIND libgomp pins the initial thread to the first place before main, so its
  // mask shows one place; the rank's cores are then the union of its OpenMP places (made from the
  // process's original mask).
  const int places = omp_get_proc_bind() != omp_proc_bind_false ? omp_get_num_places() : 0;
  if (places > 0) {
    for (int p = 0; p < places; ++p) {
      std::vector<int> ids(omp_get_place_num_procs(p));
      omp_get_place_proc_ids(p, ids.data());
      b.cores.insert(b.cores.end(), ids.begin(), ids.end());
    }
    std::sort(b.cores.begin(), b.cores.end());
    b.cores.erase(std::unique(b.cores.begin(), b.cores.end()), b.cores.end());
  } else {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) b.cores.push_back(c);
  }
  b.omp_threads = omp_get_max_threads();
  b.host_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return b;
}

std::string format_core_list(const std::vector<int>& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cores[i]);
    if (j > i) out += '-' + std::to_string(cores[j]);
    i = j + 1;
  }
  return out;
}

BindingReport make_binding_report(const std::vector<RankBinding>& bindings) {
  BindingReport report;
  size_t host_width = 4, cores_width = 5;
  for (const auto& b : bindings) {
    host_width = std::max(host_width, b.host.size());
    cores_width = std::max(cores_width, format_core_list(b.cores).size());
  }
  std::ostringstream table;
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size(), ' '); };
  table << "rank  " << pad("host", host_width) << "  " << pad("cores", cores_width)
        << "  omp_threads\n";
  struct HostUse {
    int threads = 0, ranks = 0, cpus = 0;
    std::set<int> cores;
  };
  std::map<std::string, HostUse> hosts;
  for (const auto& b : bindings) {
    const std::string cores = format_core_list(b.cores);
    std::string rank = std::to_string(b.rank);
    table << pad(rank, 4) << "  " << pad(b.host, host_width) << "  " << pad(cores, cores_width)
          << "  " << b.omp_threads << '\n';
    HostUse& use = hosts[b.host];
    use.threads += b.omp_threads;
    use.ranks += 1;
    use.cpus = std::max(use.cpus, b.host_cpus);
    use.cores.insert(b.cores.begin(), b.cores.end());
    if (!b.cores.empty() && b.omp_threads > static_cast<int>(b.cores.size()))
      report.warnings.push_back("rank " + std::to_string(b.rank) + " on " + b.host + " runs " +
                                std::to_string(b.omp_threads) + " OpenMP threads on " +
                                std::to_string(b.cores.size()) + " allowed core(s) (" + cores +
                                ")");
  }
  for (const auto& [host, use] : hosts) {
    const std::string what = "host " + host + ": " + std::to_string(use.ranks) + " rank(s) x " +
                             "OpenMP threads = " + std::to_string(use.threads) + " threads";
    if (use.cpus > 0 && use.threads > use.cpus)
      report.warnings.push_back(what + " on " + std::to_string(use.cpus) +
                                " CPUs: oversubscribed, lower --threads or ranks per node");
    else if (!use.cores.empty() && use.threads > static_cast<int>(use.cores.size()))
      report.warnings.push_back(what + " on the " + std::to_string(use.cores.size()) +
                                " core(s) their affinity masks allow together: ranks are bound "
                                "on top of each other, check mpirun --bind-to / --map-by");
  }
  report.table = table.str();
  return report;
}

std::vector<RankBinding> gather_bindings(const Communicator& comm, int root) {
  const auto texts = comm.gather_strings(encode(local_binding(comm.rank())), root);
  std::vector<RankBinding> bindings;
  for (const auto& text : texts) bindings.push_back(decode(text));
  return bindings;
}

BindingReport print_binding_report(const Communicator& comm, std::ostream& out) {
  const auto bindings = gather_bindings(comm, 0);
  if (comm.rank() != 0) return {};
  BindingReport report = make_binding_report(bindings);
  out << "binding of " << bindings.size() << " rank(s):\n" << report.table;
  for (const auto& w : report.warnings) out << "warning: " << w << '\n';
  out.flush();
  return report;
}

}  // namespace nostrum::mpi
