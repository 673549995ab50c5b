// The CPU features table against what the Linux kernel reports in /proc/cpuinfo (its own CPUID
// reading, with the features the OS does not enable removed): runs on every CPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "nostrum/core/cpu_features.hpp"

namespace {

struct ProcCpuinfo {
  std::string vendor;
  int family = -1, model = -1;
  std::set<std::string> flags;
};

// The first processor's block of /proc/cpuinfo.
ProcCpuinfo read_proc_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  REQUIRE(in);
  ProcCpuinfo info;
  std::string line;
  while (std::getline(in, line) && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") info.vendor = value;
    if (key == "cpu family") info.family = std::stoi(value);
    if (key == "model") info.model = std::stoi(value);
    if (key == "flags") {
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
    }
  }
  REQUIRE_FALSE(info.flags.empty());
  return info;
}

}  // namespace

TEST_CASE("the CPU features table agrees with /proc/cpuinfo", "[cpu_features]") {
  const ProcCpuinfo proc = read_proc_cpuinfo();
  const nostrum::CpuFeatures f = nostrum::detect_cpu_features();
  auto has = [&](const char* flag) { return proc.flags.count(flag) == 1; };
  INFO(f.describe());
  CHECK(f.vendor == proc.vendor);
  CHECK(f.family == proc.family);
  CHECK(f.model == proc.model);
  CHECK(f.avx2 == has("avx2"));
  CHECK(f.fma == has("fma"));
  CHECK(f.avx512f == has("avx512f"));
  CHECK(f.avx512bw == has("avx512bw"));
  CHECK(f.avx512vl == has("avx512vl"));
  CHECK(f.avx512dq == has("avx512dq"));
  CHECK(f.avx512cd == has("avx512cd"));
  CHECK(f.avx512_bf16 == has("avx512_bf16"));
  CHECK(f.amx_tile == has("amx_tile"));
  CHECK(f.amx_bf16 == has("amx_bf16"));
}

TEST_CASE("the process's table is the detected one, AMX permission asked only with AMX",
          "[cpu_features]") {
  const nostrum::CpuFeatures detected = nostrum::detect_cpu_features();
  const nostrum::CpuFeatures& table = nostrum::cpu_features();
  CHECK(&table == &nostrum::cpu_features());  // detected once
  if (!(table.amx_tile && table.amx_bf16)) CHECK_FALSE(table.amx_permitted);
  if (!table.max_isa.empty()) return;  // NOSTRUM_MAX_ISA lowers the table: isa_cap_test.cpp
  CHECK(table.avx512() == (detected.avx512f && detected.avx512bw));
  CHECK(table.avx2 == detected.avx2);
  const char* off = std::getenv("NOSTRUM_CPU_NO_BF16");
  const bool hidden = off && *off && *off != '0';
  CHECK(table.avx512_bf16 == (detected.avx512_bf16 && !hidden));
}
