// For tests that compare a dispatch with the CPU's own flags (/proc/cpuinfo,
// __builtin_cpu_supports): what /proc/cpuinfo lists, and whether the environment's NOSTRUM_MAX_ISA
// (none: every level) lets a level through, both read here independently of the CPU features table
// so a dispatch that ignored the CPU or the cap would be caught.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "nostrum/core/isa.hpp"

namespace nostrum::testing {

// Whether /proc/cpuinfo's flags line lists `flag` ("avx512_bf16", "amx_tile"): the CPU's own word,
// apart from nostrum's features table (false where the file has no flags line, as on aarch64).
inline bool cpuinfo_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

inline bool cap_allows(Isa level) {
  const char* cap = std::getenv("NOSTRUM_MAX_ISA");
  return cap == nullptr || *cap == '\0' || level <= parse_max_isa(cap);
}

}  // namespace nostrum::testing
