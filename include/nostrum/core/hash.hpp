// Hash64: nostrum's one 64-bit hash, over a stream of bytes fed in any number of pieces (FNV-1a
// style over 8-byte words, the tail byte by byte, then murmur3's fmix64 avalanche). It detects
// damaged or differing data (one flipped bit changes it with overwhelming probability); it is not
// cryptographic. Used for the weight checksums across ranks, the dataset manifest's identity and
// the checkpoint checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nostrum {

class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0) : hash_(kBasis ^ seed) {}
  // The stream continues with these bytes; the result depends on the concatenation only.
  Hash64& bytes(const void* data, size_t size);
  Hash64& integer(int64_t value) { return bytes(&value, sizeof value); }
  Hash64& real(double value) { return bytes(&value, sizeof value); }
  Hash64& text(const std::string& s) {  // length first: "ab","c" differs from "a","bc"
    integer(static_cast<int64_t>(s.size()));
    return bytes(s.data(), s.size());
  }
  uint64_t value() const;

 private:
  static constexpr uint64_t kBasis = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  void mix_word(uint64_t word);
  uint64_t hash_;
  unsigned char pending_[8] = {};  // the bytes of a word not yet complete
  size_t pending_size_ = 0;
};

// The hash of one buffer, seeded with its length.
inline uint64_t hash_bytes(const void* data, size_t size) {
  return Hash64(size).bytes(data, size).value();
}

}  // namespace nostrum
