// Hash64 (core/hash.hpp): any flipped bit and the tail bytes change it, a stream fed in pieces
// hashes as one buffer, and hash_bytes keeps the value the weight checksums have always had.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "nostrum/core/hash.hpp"

using nostrum::Hash64;
using nostrum::hash_bytes;

TEST_CASE("hash_bytes changes with any flipped bit and covers tail bytes", "[core][hash]") {
  std::vector<unsigned char> bytes(1003);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31);
  const uint64_t base = hash_bytes(bytes.data(), bytes.size());
  CHECK(base == hash_bytes(bytes.data(), bytes.size()));
  CHECK(base != hash_bytes(bytes.data(), bytes.size() - 1));
  for (size_t i : {size_t{0}, size_t{7}, size_t{8}, size_t{500}, size_t{1000}, size_t{1002}}) {
    for (int bit = 0; bit < 8; bit += 3) {
      bytes[i] ^= static_cast<unsigned char>(1u << bit);
      CHECK(base != hash_bytes(bytes.data(), bytes.size()));
      bytes[i] ^= static_cast<unsigned char>(1u << bit);
    }
  }
  // -0.0f and 0.0f differ in bytes: the hash is over bits, not values
  const float zero = 0.0f, negative_zero = -0.0f;
  CHECK(hash_bytes(&zero, 4) != hash_bytes(&negative_zero, 4));
}

TEST_CASE("a stream fed in pieces hashes as the whole buffer", "[core][hash]") {
  std::vector<unsigned char> bytes(101);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  const uint64_t whole = Hash64(7).bytes(bytes.data(), bytes.size()).value();
  for (size_t cut : {size_t{1}, size_t{3}, size_t{8}, size_t{13}, size_t{100}}) {
    Hash64 pieces(7);
    pieces.bytes(bytes.data(), cut).bytes(bytes.data() + cut, 0);
    pieces.bytes(bytes.data() + cut, bytes.size() - cut);
    CHECK(pieces.value() == whole);
  }
  // Three pieces whose middle one leaves the word still short (1 + 2 bytes pending), and one that
  // completes it and goes on (3 + 9).
  for (auto [first, second] : {std::pair<size_t, size_t>{1, 2}, {3, 9}, {5, 3}}) {
    Hash64 pieces(7);
    pieces.bytes(bytes.data(), first).bytes(bytes.data() + first, second);
    pieces.bytes(bytes.data() + first + second, bytes.size() - first - second);
    CHECK(pieces.value() == whole);
  }
  CHECK(Hash64(8).bytes(bytes.data(), bytes.size()).value() != whole);  // the seed counts
  CHECK(Hash64().text("ab").text("c").value() != Hash64().text("a").text("bc").value());
}

TEST_CASE("hash_bytes keeps the weight checksum's value", "[core][hash]") {
  // The value mpi::checksum_bytes (now hash_bytes) gave before the hash moved to core: the
  // checksums in earlier result files and dataset identities still compare.
  std::vector<unsigned char> bytes(101);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  CHECK(hash_bytes(bytes.data(), bytes.size()) == 0xa00624035dbc256dULL);
}
