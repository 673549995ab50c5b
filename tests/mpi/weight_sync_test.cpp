// Identical initial weights: broadcast from rank 0, checksum verification naming differing ranks
// (the hash itself: tests/core/hash_test.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "mpi/communicator.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"

using nostrum::mpi::Communicator;

TEST_CASE("broadcast_weights makes every rank hold rank 0's weights", "[mpi][weights]") {
  Communicator world;
  std::vector<float> weights(100003);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.001f * i + world.rank();
  const uint64_t checksum = nostrum::mpi::broadcast_weights(world, weights.data(), weights.size());
  for (size_t i = 0; i < weights.size(); ++i) REQUIRE(weights[i] == 0.001f * i);
  CHECK(checksum == nostrum::hash_bytes(weights.data(), weights.size() * sizeof(float)));
  auto all = world.gather_strings(std::to_string(checksum), 0);
  for (const auto& c : all) CHECK(c == std::to_string(checksum));
}

TEST_CASE("verify_identical throws on every rank naming the ranks that differ", "[mpi][weights]") {
  Communicator world;
  const int p = world.size();
  std::vector<float> weights(1000, 0.5f);
  CHECK_NOTHROW(nostrum::mpi::verify_identical(world, weights.data(), weights.size(), "weights"));

  if (world.rank() == p - 1) weights[999] = std::nextafter(0.5f, 1.0f);  // one ulp on the last rank
  try {
    nostrum::mpi::verify_identical(world, weights.data(), weights.size(), "initial weights");
    FAIL("a one-ulp difference on rank " << p - 1 << " went unnoticed");
  } catch (const nostrum::MpiError& e) {
    const std::string message = e.what();
    CHECK(message.find("initial weights differ") != std::string::npos);
    CHECK(message.find("rank(s) " + std::to_string(p - 1) + " do not match rank 0") !=
          std::string::npos);
  }

  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(world.rank());
  try {
    nostrum::mpi::verify_identical(world, weights.data(), weights.size(), "weights");
    FAIL("rank-dependent weights went unnoticed");
  } catch (const nostrum::MpiError& e) {
    std::string expected = "rank(s) 1";
    for (int r = 2; r < p; ++r) expected += ", " + std::to_string(r);
    CHECK(std::string(e.what()).find(expected + " do not match") != std::string::npos);
  }
}
