// SplitReader: one split of a dataset as a flat array of samples 0..count-1 over its shards (all
// opened and validated up front, so a missing or corrupt shard stops the run before training).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "io/shard.hpp"

namespace nostrum::io {

class SplitReader {
 public:
  // Opens every shard of manifest.split(split) under dir; checks each against the manifest (count,
  // image kind and size) and its labels against the class count.
  SplitReader(const std::string& dir, const Manifest& manifest, const std::string& split);

  const std::string& split() const { return split_; }
  int64_t count() const { return count_; }
  int32_t label(int64_t sample) const;
  // Reads sample's bytes (checksum verified); errors name shard file, local and global sample.
  void read(int64_t sample, std::vector<uint8_t>& out) const;
  // "<shard path> sample <local> (<split> sample <global>)"
  std::string describe(int64_t sample) const;
  const std::vector<ShardReader>& shards() const { return shards_; }
  size_t max_sample_size() const { return max_sample_size_; }

 private:
  // (shard, local index) of a global sample index; DataError if out of range.
  std::pair<size_t, int64_t> locate(int64_t sample) const;

  std::string split_;
  int64_t count_ = 0;
  std::vector<ShardReader> shards_;
  std::vector<int64_t> first_;  // (shards + 1) prefix sums of shard counts
  size_t max_sample_size_ = 0;
};

}  // namespace nostrum::io
