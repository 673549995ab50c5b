// DistributedSampler: which samples rank r of P reads in batch b of an epoch. One permutation of
// the whole split per (seed, epoch); global batch b is positions [b*P*B, (b+1)*P*B) of it and rank
// r takes the B positions starting at (b*P + r)*B, so a global batch holds the same samples for any
// P.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::data {

// What happens to the samples that do not fill a last global batch of P*B.
enum class TailPolicy {
  drop,   // epoch = floor(N / (P*B)) full global batches; the tail is left out (shuffled: other
          // samples each epoch). Training default, as MLPerf's reference (drop_last).
  pad,    // epoch = ceil(N / (P*B)) full global batches; the last is completed by repeating samples
          // from the start of the permutation (PyTorch DistributedSampler's default)
  exact,  // every sample exactly once (evaluation); every rank still gets ceil(N / (P*B)) batches,
          // the last ones partial or empty (count 0), so collective evaluation never deadlocks
};

TailPolicy parse_tail_policy(
    const std::string& name);  // "drop" | "pad" | "exact"; OptionError else
const char* to_string(TailPolicy policy);

struct SamplerConfig {
  int64_t samples = 0;      // N: samples in the split
  int64_t local_batch = 0;  // B: samples per batch per rank
  int rank = 0;             // r in [0, ranks)
  int ranks = 1;            // P
  uint64_t seed = 0;
  bool shuffle = true;  // false: identity order (evaluation)
  TailPolicy tail = TailPolicy::drop;
};

class DistributedSampler {
 public:
  explicit DistributedSampler(const SamplerConfig& config);  // OptionError on a bad config

  const SamplerConfig& config() const { return config_; }
  int64_t batches_per_epoch() const { return batches_; }  // the same on every rank
  // Samples this rank gets per epoch: batches * B for drop/pad, <= that for exact.
  int64_t samples_per_rank() const;

  // Computes the epoch's permutation (O(N), call once per epoch). Not thread-safe against batch().
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // Sample indices of this rank's batch b of the current epoch into out[0..B); returns the count
  // (B, except for exact: 0..B).
  int64_t batch(int64_t b, int64_t* out) const;  // out (B)

 private:
  SamplerConfig config_;
  int64_t batches_ = 0;
  int64_t epoch_ = -1;
  std::vector<int64_t> permutation_;  // (N), this epoch's order of the whole split
};

}  // namespace nostrum::data
