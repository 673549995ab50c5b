// Arena: aligned slices, zero fill, overflow errors that name the arena and the slice.
#include <catch2/catch.hpp>

#include <cstdint>

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
