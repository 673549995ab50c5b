// Page mappings: large ones start on 2 MiB boundaries and carry the huge-page advice (the VMA's
// "hg" flag in /proc/self/smaps), small ones do not; NOSTRUM_HUGE_PAGES parsed or refused by name;
// arenas of 2 MiB or more mapped so.
#include <algorithm>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/page_memory.hpp"

namespace {

// The VmFlags of the mapping that holds p (from /proc/self/smaps), or "" when none holds it.
std::string vm_flags_of(const void* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line.substr(8) + " ";
  }
  return "";
}

bool advised_huge(const void* p) {
  return vm_flags_of(p).find(" hg ") != std::string::npos;
}

// What this process's environment asks for, read here on its own (not through nostrum).
bool environment_wants_huge_pages() {
  const char* v = std::getenv("NOSTRUM_HUGE_PAGES");
  return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0));
}

bool aligned_2m(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20) == 0;
}

}  // namespace

TEST_CASE("NOSTRUM_HUGE_PAGES takes 0, 1, off, on or nothing, and refuses the rest by name",
          "[core]") {
  CHECK(nostrum::parse_huge_pages(nullptr));
  CHECK(nostrum::parse_huge_pages(""));
  CHECK(nostrum::parse_huge_pages("1"));
  CHECK(nostrum::parse_huge_pages("on"));
  CHECK_FALSE(nostrum::parse_huge_pages("0"));
  CHECK_FALSE(nostrum::parse_huge_pages("off"));
  CHECK_THROWS_AS(nostrum::parse_huge_pages("yes"), nostrum::OptionError);
  CHECK_THROWS_WITH(nostrum::parse_huge_pages("2"),
                    Catch::Contains("NOSTRUM_HUGE_PAGES") && Catch::Contains("'2'"));
  CHECK(nostrum::huge_pages_wanted() == environment_wants_huge_pages());
}

TEST_CASE(
    "a large page mapping starts on 2 MiB, is advised for huge pages as the environment asks, "
    "and reads 0",
    "[core][madvise]") {
  const bool huge = environment_wants_huge_pages();
  const size_t bytes = (size_t(5) << 20) + 12345;  // not a multiple of 2 MiB
  nostrum::PageBuffer large(bytes, "test mapping");
  const auto* p = static_cast<const unsigned char*>(large.data());
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  if (huge) CHECK(aligned_2m(p));
  CHECK(advised_huge(p) == huge);
  CHECK(advised_huge(p + bytes - 1) == huge);  // the advice covers the whole length
  for (size_t i = 0; i < bytes; i += 4096) REQUIRE(p[i] == 0);
  CHECK(p[bytes - 1] == 0);
  // Below 2 MiB: page-aligned, never advised.
  nostrum::PageBuffer small((size_t(1) << 20) + 1, "small test mapping");
  CHECK(reinterpret_cast<uintptr_t>(small.data()) % 4096 == 0);
  CHECK_FALSE(advised_huge(small.data()));
  // Moved, the mapping goes with it and the source is empty.
  nostrum::PageBuffer moved(std::move(large));
  CHECK(moved.data() == p);
  CHECK(large.data() == nullptr);
}

TEST_CASE("arenas of 2 MiB or more are mapped on huge pages, eager and zeroed on first touch alike",
          "[core][madvise]") {
  const bool huge = environment_wants_huge_pages();
  const size_t floats = size_t(3) << 20;  // 12 MiB
  for (auto zeroing : {nostrum::Arena::Zeroing::kEager, nostrum::Arena::Zeroing::kOnFirstTouch}) {
    nostrum::Arena a(floats, "big", zeroing);
    const float* p = a.take(floats, "all");
    if (huge) CHECK(aligned_2m(p));
    CHECK(advised_huge(p) == huge);
    CHECK(p[0] == 0.0f);
    CHECK(p[floats - 1] == 0.0f);
  }
  nostrum::Arena small(1000, "small");
  CHECK_FALSE(advised_huge(small.data()));
}

// Run by the ctest page_memory_refuses_bad_huge_pages, under NOSTRUM_HUGE_PAGES=yes (hidden
// otherwise): the setting is read by every mapping, so a bad value stops even a small one.
TEST_CASE("under a bad NOSTRUM_HUGE_PAGES even a small mapping is refused by name", "[.]") {
  REQUIRE(std::getenv("NOSTRUM_HUGE_PAGES") != nullptr);
  REQUIRE_THROWS_AS(nostrum::PageBuffer(4096, "small"), nostrum::OptionError);
}

TEST_CASE("a page buffer reserves: kept where it holds enough, mapped anew and zeroed where not",
          "[page_memory]") {
  nostrum::PageBuffer buffer;
  CHECK(buffer.reserve(1000, "reserved"));
  auto* first = static_cast<unsigned char*>(buffer.data());
  REQUIRE(first != nullptr);
  first[999] = 7;
  CHECK_FALSE(buffer.reserve(1000, "reserved"));  // enough: the same memory, written kept
  CHECK_FALSE(buffer.reserve(10, "reserved"));
  CHECK(buffer.data() == first);
  CHECK(first[999] == 7);
  const size_t large = size_t(3) << 20;
  CHECK(buffer.reserve(large, "reserved"));
  const auto* grown = static_cast<const unsigned char*>(buffer.data());
  CHECK(std::all_of(grown, grown + large, [](unsigned char b) { return b == 0; }));
  CHECK_FALSE(buffer.reserve(large, "reserved"));
}
