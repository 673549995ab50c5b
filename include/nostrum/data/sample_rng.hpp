// SampleRng: a small counter-keyed random generator. Every random choice of the input pipeline
// comes from one keyed by (seed, epoch, stream), so results do not depend on thread or rank count.
#pragma once

#include <cstdint>

#include "nostrum/core/splitmix64.hpp"

namespace nostrum::data {

class SampleRng {
 public:
  // stream: the sample index for augmentation; a fixed tag for the epoch permutation.
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t stream)
      : state_(
            splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ (stream * 0xd1b54a32d192ed03ULL))) {}

  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < 2^-32 for n < 2^32).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace nostrum::data
