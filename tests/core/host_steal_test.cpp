// The hypervisor's steal time (core/host_steal.hpp): /proc/stat's `cpu` line parsed to its 8th
// value, anything else -1; on this machine the reading is -1 (none accounted) or a count that
// never goes back.
#include <catch2/catch.hpp>

#include <cstdint>

#include "nostrum/core/host_steal.hpp"

using nostrum::host_steal_ticks;
using nostrum::steal_ticks_from_proc_stat;

TEST_CASE("steal ticks are /proc/stat's cpu line's 8th value, -1 without one", "[core][any-cpu]") {
  CHECK(steal_ticks_from_proc_stat("cpu  3713668 1341 614231 2173075 4900 0 15341 21353 0 0\n"
                                   "cpu0 1 2 3 4 5 6 7 8 9 10\n") == 21353);
  CHECK(steal_ticks_from_proc_stat("cpu 1 2 3 4 5 6 7 0") == 0);
  CHECK(steal_ticks_from_proc_stat("cpu  1 2 3 4 5 6 7") == -1);  // a kernel without the field
  CHECK(steal_ticks_from_proc_stat("cpu0 1 2 3 4 5 6 7 8 9") == -1);
  CHECK(steal_ticks_from_proc_stat("intr 1 2 3 4 5 6 7 8") == -1);
  CHECK(steal_ticks_from_proc_stat("cpu 1 2 3 4 5 6 x 8") == -1);
  CHECK(steal_ticks_from_proc_stat("") == -1);
  const int64_t first = host_steal_ticks(), second = host_steal_ticks();
  CHECK(first >= -1);
  if (first >= 0) CHECK(second >= first);
}
