// Arena: aligned slices, zero fill (eager, and fresh pages committed on first touch), overflow
// errors that name the arena and the slice.
#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"

using nostrum::Arena;

TEST_CASE("arena hands out 64-byte aligned, non-overlapping, zeroed slices", "[core]") {
  Arena arena(1000, "parameters");
  float* a = arena.take(3, "conv1.weight");
  float* b = arena.take(17, "bn1.weight");
  float* c = arena.take(16, "fc.bias");
  for (float* p : {a, b, c}) CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  CHECK(b - a == 16);
  CHECK(c - b == 32);
  CHECK(arena.offset_of(c) == 48);
  CHECK(arena.used() == 64);
  for (size_t i = 0; i < arena.capacity(); ++i) REQUIRE(arena.data()[i] == 0.0f);
  a[0] = 3.0f;
  arena.zero();
  CHECK(a[0] == 0.0f);
}

TEST_CASE("arena overflow throws a ShapeError naming the arena and the slice", "[core]") {
  Arena arena(32, "activations");
  arena.take(20, "x");
  CHECK_THROWS_AS(arena.take(20, "layer1.0.conv1"), nostrum::ShapeError);
  CHECK_THROWS_WITH(arena.take(20, "layer1.0.conv1"),
                    Catch::Contains("activations") && Catch::Contains("layer1.0.conv1"));
  CHECK(arena.used() == 32);  // the failed take changed nothing
}

TEST_CASE("an arena zeroed on first touch reads 0 and takes memory only where written", "[core]") {
  // 64 MiB of fresh pages: none resident before a write, about the written 16 MiB after (up to
  // one 2 MiB transparent huge page more at each end), all of it 0 where not written.
  const size_t floats = size_t(16) << 20;
  nostrum::Arena a(floats, "lazy", nostrum::Arena::Zeroing::kOnFirstTouch);
  float* p = a.take(floats, "all");
  REQUIRE(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = floats * sizeof(float);
  const auto resident_bytes = [&] {
    std::vector<unsigned char> in_core((bytes + page - 1) / page);
    REQUIRE(mincore(p, bytes, in_core.data()) == 0);
    size_t n = 0;
    for (unsigned char c : in_core) n += c & 1;
    return n * size_t(page);
  };
  CHECK(resident_bytes() <= (size_t(2) << 20));
  const size_t written = floats / 4;
  for (size_t i = 0; i < written; ++i) p[i] = 1.0f;
  const size_t resident = resident_bytes();
  CHECK(resident >= written * sizeof(float));
  CHECK(resident <= written * sizeof(float) + (size_t(4) << 20));
  CHECK(p[written - 1] == 1.0f);
  CHECK(p[written] == 0.0f);
  CHECK(p[floats - 1] == 0.0f);
  // The same reads as an eagerly zeroed arena, which is resident in full.
  nostrum::Arena eager(size_t(1) << 20, "eager");
  const float* e = eager.take(size_t(1) << 20, "all");
  CHECK(std::all_of(e, e + (size_t(1) << 20), [](float v) { return v == 0.0f; }));
}
