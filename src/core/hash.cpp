// Hash64: words mixed as they complete (a word may span two bytes() calls), the tail at value().
#include "nostrum/core/hash.hpp"

#include <cstring>

namespace nostrum {

void Hash64::mix_word(uint64_t word) {
  hash_ = (hash_ ^ word) * kPrime;
  hash_ ^= hash_ >> 29;
}

Hash64& Hash64::bytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (pending_size_ > 0 && size > 0) {  // complete the word begun by an earlier call
    pending_[pending_size_++] = *p++;
    --size;
    if (pending_size_ == 8) {
      uint64_t word;
      std::memcpy(&word, pending_, 8);
      mix_word(word);
      pending_size_ = 0;
    }
  }
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    mix_word(word);
  }
  std::memcpy(pending_ + pending_size_, p, size);
  pending_size_ += size;
  return *this;
}

uint64_t Hash64::value() const {
  uint64_t h = hash_;
  for (size_t i = 0; i < pending_size_; ++i) h = (h ^ pending_[i]) * kPrime;
  h ^= h >> 33;  // final avalanche (murmur3 fmix64)
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace nostrum
