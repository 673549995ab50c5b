// Hash64: words mixed as they complete (a word may span two bytes() calls), the tail at value().
#include "nostrum/core/hash.hpp"

#include <algorithm>
#include <cstring>

namespace nostrum {

void Hash64::mix_word(uint64_t word) {
  hash_ = (hash_ ^ word) * kPrime;
  hash_ ^= hash_ >> 29;
}

Hash64& Hash64::bytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (pending_size_ > 0) {  // complete the word begun by an earlier call, if this one reaches it
    const size_t take = std::min(sizeof pending_ - pending_size_, size);
    std::memcpy(pending_ + pending_size_, p, take);
    pending_size_ += take, p += take, size -= take;
    if (pending_size_ < sizeof pending_) return *this;  // still short: all of it is pending
    uint64_t word;
    std::memcpy(&word, pending_, 8);
    mix_word(word);
    pending_size_ = 0;
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
