// host_steal_ticks: /proc/stat's steal time, read only where a hypervisor accounts one.
#include "nostrum/core/host_steal.hpp"

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>

namespace nostrum {

int64_t steal_ticks_from_proc_stat(const std::string& text) {
  std::istringstream in(text);
  std::string tag;
  // cpu user nice system idle iowait irq softirq steal ...
  if (!(in >> tag) || tag != "cpu") return -1;
  int64_t value = -1;
  for (int field = 0; field < 8; ++field)
    if (!(in >> value)) return -1;
  return value;
}

int64_t host_steal_ticks() {
  using Clock = std::chrono::steady_clock;
  // While nothing was ever stolen: the time before which not to look again.
  static std::atomic<int64_t> quiet_until{0};
  static std::atomic<bool> accounted{false};
  const int64_t now = Clock::now().time_since_epoch().count();
  if (!accounted.load(std::memory_order_relaxed) &&
      now < quiet_until.load(std::memory_order_relaxed))
    return -1;
  std::ifstream file("/proc/stat");
  std::string line;
  const int64_t ticks = std::getline(file, line) ? steal_ticks_from_proc_stat(line) : -1;
  if (ticks > 0) {
    accounted.store(true, std::memory_order_relaxed);
    return ticks;
  }
  quiet_until.store(
      now + std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(1)).count(),
      std::memory_order_relaxed);
  return -1;
}

}  // namespace nostrum
