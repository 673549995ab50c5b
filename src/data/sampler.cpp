// DistributedSampler: the epoch permutation (Fisher-Yates from SampleRng(seed, epoch, tag)) and the
// rank's slice of each global batch.
#include "nostrum/data/sampler.hpp"

#include <algorithm>
#include <numeric>

#include "nostrum/core/error.hpp"
#include "nostrum/data/sample_rng.hpp"

namespace nostrum::data {

namespace {
constexpr uint64_t kPermutationStream = 0x7065726d75746174ULL;  // "permutat": not a sample index
}

TailPolicy parse_tail_policy(const std::string& name) {
  if (name == "drop") return TailPolicy::drop;
  if (name == "pad") return TailPolicy::pad;
  if (name == "exact") return TailPolicy::exact;
  throw OptionError("unknown tail policy '" + name + "'", "tail", "choose drop, pad or exact");
}

const char* to_string(TailPolicy policy) {
  switch (policy) {
    case TailPolicy::drop:
      return "drop";
    case TailPolicy::pad:
      return "pad";
    case TailPolicy::exact:
      return "exact";
  }
  return "?";
}

DistributedSampler::DistributedSampler(const SamplerConfig& config) : config_(config) {
  NOSTRUM_CHECK(config.samples > 0, OptionError, "a split with no samples cannot be sampled",
                "sampler");
  NOSTRUM_CHECK(config.local_batch > 0, OptionError,
                "local batch must be positive, got " + std::to_string(config.local_batch),
                "sampler");
  NOSTRUM_CHECK(config.ranks > 0 && config.rank >= 0 && config.rank < config.ranks, OptionError,
                "rank " + std::to_string(config.rank) + " of " + std::to_string(config.ranks) +
                    " is out of range",
                "sampler");
  const int64_t global = config.local_batch * config.ranks;
  if (config.tail == TailPolicy::drop) {
    batches_ = config.samples / global;
    NOSTRUM_CHECK(batches_ > 0, OptionError,
                  "global batch " + std::to_string(global) + " exceeds the split's " +
                      std::to_string(config.samples) + " samples with tail policy drop",
                  "sampler", "use a smaller batch or --tail pad");
  } else {
    batches_ = (config.samples + global - 1) / global;
  }
  permutation_.resize(static_cast<size_t>(config.samples));
}

int64_t DistributedSampler::samples_per_rank() const {
  if (config_.tail != TailPolicy::exact) return batches_ * config_.local_batch;
  int64_t total = 0;
  for (int64_t b = 0; b < batches_; ++b) {
    const int64_t begin = (b * config_.ranks + config_.rank) * config_.local_batch;
    total += std::max<int64_t>(0, std::min(config_.local_batch, config_.samples - begin));
  }
  return total;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
  if (!config_.shuffle) return;
  SampleRng rng(config_.seed, static_cast<uint64_t>(epoch), kPermutationStream);
  for (size_t i = permutation_.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng.below(i + 1));
    std::swap(permutation_[i], permutation_[j]);
  }
}

int64_t DistributedSampler::batch(int64_t b, int64_t* out) const {
  NOSTRUM_CHECK(epoch_ >= 0, OptionError, "set_epoch() must come before batch()", "sampler");
  NOSTRUM_CHECK(
      b >= 0 && b < batches_, OptionError,
      "batch " + std::to_string(b) + " out of range [0, " + std::to_string(batches_) + ")",
      "sampler");
  const int64_t n = config_.samples;
  const int64_t begin = (b * config_.ranks + config_.rank) * config_.local_batch;
  int64_t count = config_.local_batch;
  if (config_.tail == TailPolicy::exact) count = std::max<int64_t>(0, std::min(count, n - begin));
  for (int64_t j = 0; j < count; ++j) {
    out[j] = permutation_[static_cast<size_t>((begin + j) % n)];  // % n: pad wraps to the start
  }
  return count;
}

}  // namespace nostrum::data
