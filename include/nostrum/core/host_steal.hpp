// The CPU time a hypervisor took from this virtual machine (Linux's steal time in /proc/stat):
// what lets a timing tell a slow call from one whose vCPU was held off by the host.
#pragma once

#include <cstdint>
#include <string>

namespace nostrum {

// The steal time of all CPUs so far, in clock ticks (/proc/stat's `cpu` line, 8th value), or -1
// where there is nothing to watch: not Linux, no such field, or none ever accounted (0: bare
// metal, or a hypervisor that does not report it; looked at again at most once a second then,
// so that a machine without steal pays one read a second and not one a call).
int64_t host_steal_ticks();

// The same from the text of a /proc/stat (the parser, for tests): -1 when its `cpu` line has no
// steal field.
int64_t steal_ticks_from_proc_stat(const std::string& text);

}  // namespace nostrum
