// Page-granular allocations advised for transparent huge pages, and the process's peak RSS and
// huge-page count.
#include "nostrum/core/page_memory.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "nostrum/core/error.hpp"

namespace nostrum {

bool parse_huge_pages(const char* value) {
  if (!value || !*value || std::strcmp(value, "1") == 0 || std::strcmp(value, "on") == 0)
    return true;
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "off") == 0) return false;
  throw OptionError("NOSTRUM_HUGE_PAGES='" + std::string(value) + "' is not 0, 1, off or on",
                    "environment variable NOSTRUM_HUGE_PAGES",
                    "unset it (huge pages advised) or set 0 to map 4 KiB pages only");
}

bool huge_pages_wanted() {
  static const bool wanted = parse_huge_pages(std::getenv("NOSTRUM_HUGE_PAGES"));
  return wanted;
}

PageMapping map_pages(size_t bytes, const std::string& what) {
  // The setting read (and a bad value refused) by every mapping, large or not.
  const bool wanted = huge_pages_wanted();
  const bool huge = bytes >= kHugePageBytes && wanted;
  // For a huge-page-aligned start: one huge page more, and the unaligned head and tail returned.
  const size_t length =
      huge ? (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes : bytes;
  const size_t asked = huge ? length + kHugePageBytes : length;
  void* p = mmap(nullptr, asked, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  NOSTRUM_CHECK(p != MAP_FAILED, Error,
                "cannot map " + std::to_string(asked >> 20) + " MiB: " + std::strerror(errno), what,
                "reduce the batch size or the model");
  if (!huge) return PageMapping{p, asked};
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
  if (aligned > start) munmap(p, aligned - start);
  const size_t tail = start + asked - (aligned + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: refused is kept
  return PageMapping{reinterpret_cast<void*>(aligned), length};
}

void unmap_pages(const PageMapping& mapping) {
  if (mapping.data) munmap(mapping.data, mapping.bytes);
}

size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) << 10;  // Linux reports KiB
}

size_t anon_huge_page_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AnonHugePages:", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    size_t kb = 0;
    fields >> kb;
    return kb << 10;
  }
  return 0;
}

}  // namespace nostrum
