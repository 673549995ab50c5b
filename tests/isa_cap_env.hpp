// For tests that compare a dispatch with the CPU's own flags (/proc/cpuinfo,
// __builtin_cpu_supports): whether the environment's NOSTRUM_MAX_ISA (none: every level) lets a
// level through, read here independently of the CPU features table so a dispatch that ignored the
// cap would be caught.
#pragma once

#include <cstdlib>

#include "nostrum/core/isa.hpp"

namespace nostrum::testing {

inline bool cap_allows(Isa level) {
  const char* cap = std::getenv("NOSTRUM_MAX_ISA");
  return cap == nullptr || *cap == '\0' || level <= parse_max_isa(cap);
}

}  // namespace nostrum::testing
