// Large allocations straight from the OS, on 2 MiB boundaries and advised for transparent huge
// pages (madvise MADV_HUGEPAGE), so that streaming through a step's tensors walks one TLB entry
// per 2 MiB instead of per 4 KiB. NOSTRUM_HUGE_PAGES=0 turns the advice off (1, or unset: on).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace nostrum {

// Allocations of at least this many bytes are mapped (and advised); smaller ones are not.
constexpr size_t kHugePageBytes = size_t(2) << 20;

// Whether mappings are advised for huge pages: NOSTRUM_HUGE_PAGES read once (unset, empty, 1 or
// on: yes; 0 or off: no); any other value throws OptionError naming the variable.
bool huge_pages_wanted();
// The environment's value parsed as huge_pages_wanted reads it (null: unset).
bool parse_huge_pages(const char* value);

// A zeroed anonymous mapping of at least `bytes` bytes: start aligned to kHugePageBytes and
// advised for huge pages when bytes >= kHugePageBytes and huge_pages_wanted(), page-aligned
// otherwise. Throws Error naming `what` when the OS refuses. A kernel without transparent huge
// pages refuses the advice; the mapping is kept without it.
struct PageMapping {
  void* data = nullptr;
  size_t bytes = 0;  // the mapped length, for unmap_pages
};
PageMapping map_pages(size_t bytes, const std::string& what);
void unmap_pages(const PageMapping& mapping);

// An owned map_pages mapping (move-only; empty when default-constructed).
class PageBuffer {
 public:
  PageBuffer() = default;
  PageBuffer(size_t bytes, const std::string& what) : m_(map_pages(bytes, what)) {}
  ~PageBuffer() { unmap_pages(m_); }
  PageBuffer(PageBuffer&& o) noexcept : m_(o.m_) { o.m_ = PageMapping{}; }
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    std::swap(m_, o.m_);
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  void* data() const { return m_.data; }
  // At least `bytes` usable: kept where the mapping already holds them, else released first
  // (never both at once) and mapped anew, zeroed. True when mapped anew.
  bool reserve(size_t bytes, const std::string& what) {
    if (m_.bytes >= bytes) return false;
    *this = PageBuffer();
    *this = PageBuffer(bytes, what);
    return true;
  }

 private:
  PageMapping m_;
};

// The process's peak resident memory so far (getrusage's ru_maxrss), in bytes.
size_t peak_rss_bytes();

// The process's anonymous memory backed by huge pages (AnonHugePages of /proc/self/smaps_rollup),
// in bytes; 0 where the kernel does not say.
size_t anon_huge_page_bytes();

}  // namespace nostrum
