// Binding report: core lists, this rank's affinity, the gathered table and oversubscription
// warnings.
#include <omp.h>
#include <sched.h>
#include <catch2/catch.hpp>

#include <sstream>

#include "mpi/binding.hpp"
#include "mpi/communicator.hpp"

using nostrum::mpi::RankBinding;

namespace {

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("core lists are printed as ranges", "[mpi][binding]") {
  using nostrum::mpi::format_core_list;
  CHECK(format_core_list({}) == "");
  CHECK(format_core_list({5}) == "5");
  CHECK(format_core_list({0, 1, 2, 3}) == "0-3");
  CHECK(format_core_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_core_list({1, 3, 5}) == "1,3,5");
}

TEST_CASE("local_binding reports this process's affinity and OpenMP threads", "[mpi][binding]") {
  const RankBinding b = nostrum::mpi::local_binding(3);
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(b.rank == 3);
  CHECK_FALSE(b.host.empty());
  CHECK(static_cast<int>(b.cores.size()) == CPU_COUNT(&set));
  for (int c : b.cores) CHECK(CPU_ISSET(c, &set));
  CHECK(b.omp_threads == omp_get_max_threads());
  CHECK(b.host_cpus >= 1);
}

TEST_CASE("rank 0 prints one table row per rank", "[mpi][binding]") {
  nostrum::mpi::Communicator world;
  std::ostringstream out;
  const auto report = nostrum::mpi::print_binding_report(world, out);
  if (world.rank() != 0) {
    CHECK(out.str().empty());
    return;
  }
  const auto mine = nostrum::mpi::local_binding(0);
  std::istringstream lines(report.table);
  std::string line;
  std::getline(lines, line);
  CHECK(line.find("omp_threads") != std::string::npos);
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int rank = -1;
    std::string host;
    fields >> rank >> host;
    CHECK(rank == rows);
    CHECK(host == mine.host);  // every test rank runs on this host
    ++rows;
  }
  CHECK(rows == world.size());
  CHECK(out.str().find(report.table) != std::string::npos);
  for (const auto& w : report.warnings) CHECK(out.str().find("warning: " + w) != std::string::npos);
}

TEST_CASE("oversubscription is warned about per host and per rank", "[mpi][binding]") {
  auto binding = [](int rank, const std::string& host, std::vector<int> cores, int threads,
                    int cpus) {
    RankBinding b;
    b.rank = rank;
    b.host = host;
    b.cores = std::move(cores);
    b.omp_threads = threads;
    b.host_cpus = cpus;
    return b;
  };
  // two hosts of 4 CPUs, two ranks each on disjoint cores, 2 threads each: fine
  auto fine = nostrum::mpi::make_binding_report(
      {binding(0, "a", {0, 1}, 2, 4), binding(1, "a", {2, 3}, 2, 4), binding(2, "b", {0, 1}, 2, 4),
       binding(3, "b", {2, 3}, 2, 4)});
  CHECK(fine.warnings.empty());
  CHECK(fine.table.find("0-1") != std::string::npos);

  // 4 ranks x 2 threads on a 2-CPU host
  auto over = nostrum::mpi::make_binding_report(
      {binding(0, "a", {0, 1}, 2, 2), binding(1, "a", {0, 1}, 2, 2), binding(2, "a", {0, 1}, 2, 2),
       binding(3, "a", {0, 1}, 2, 2)});
  CHECK(any_contains(over.warnings, "host a: 4 rank(s)"));
  CHECK(any_contains(over.warnings, "8 threads on 2 CPUs: oversubscribed"));

  // enough CPUs on the host, but both ranks pinned to core 0
  auto stacked =
      nostrum::mpi::make_binding_report({binding(0, "a", {0}, 1, 8), binding(1, "a", {0}, 1, 8)});
  CHECK(any_contains(stacked.warnings, "on top of each other"));

  // one rank runs 4 threads on one allowed core
  auto narrow = nostrum::mpi::make_binding_report({binding(0, "a", {5}, 4, 8)});
  CHECK(
      any_contains(narrow.warnings, "rank 0 on a runs 4 OpenMP threads on 1 allowed core(s) (5)"));
}
