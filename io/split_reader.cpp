// SplitReader: global sample index -> (shard, local index) by binary search over prefix sums.
#include "io/split_reader.hpp"

#include <sys/resource.h>

#include <algorithm>

#include "nostrum/core/error.hpp"

namespace nostrum::io {

namespace {
// Every shard keeps one descriptor open for pread: ImageNet at 128 MB per shard is ~1,100 of them,
// above the common soft limit of 1024. Raise the soft limit towards the hard one when needed.
void ensure_descriptors(size_t shards, const std::string& dir) {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(shards) * 2 + 256;  // train and val loaders, plus slack
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
    NOSTRUM_CHECK(
        limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= static_cast<rlim_t>(shards) + 64,
        IoError,
        "the dataset has " + std::to_string(shards) + " shards but only " +
            std::to_string(limit.rlim_cur) + " file descriptors are allowed",
        dir, "raise ulimit -n, or convert with a larger --shard-mb");
  }
}
}  // namespace

SplitReader::SplitReader(const std::string& dir, const Manifest& manifest, const std::string& split)
    : split_(split) {
  const SplitInfo& info = manifest.split(split);
  NOSTRUM_CHECK(info.count > 0, DataError, "split '" + split + "' has no samples", dir);
  const int64_t classes = static_cast<int64_t>(manifest.classes.size());
  ensure_descriptors(info.shards.size(), dir);
  first_.push_back(0);
  shards_.reserve(info.shards.size());
  for (const ShardInfo& shard : info.shards) {
    const std::string path = dir + "/" + shard.path;
    shards_.emplace_back(path, classes);
    const ShardReader& r = shards_.back();
    NOSTRUM_CHECK(r.count() == shard.count, DataError,
                  "shard holds " + std::to_string(r.count()) + " samples, the manifest says " +
                      std::to_string(shard.count),
                  path, "was the shard replaced after conversion?");
    NOSTRUM_CHECK(r.kind() == manifest.kind, DataError,
                  std::string("shard image kind ") + to_string(r.kind()) +
                      " differs from the manifest's " + to_string(manifest.kind),
                  path);
    if (manifest.kind == ImageKind::raw) {
      NOSTRUM_CHECK(r.height() == manifest.height && r.width() == manifest.width &&
                        r.channels() == manifest.channels,
                    DataError, "shard image size differs from the manifest's image_size", path);
    }
    first_.push_back(first_.back() + r.count());
    max_sample_size_ = std::max(max_sample_size_, r.max_sample_size());
  }
  count_ = first_.back();
}

std::pair<size_t, int64_t> SplitReader::locate(int64_t sample) const {
  NOSTRUM_CHECK(
      sample >= 0 && sample < count_, DataError,
      "sample " + std::to_string(sample) + " out of range [0, " + std::to_string(count_) + ")",
      "split " + split_);
  const size_t shard =
      static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), sample) - first_.begin()) -
      1;
  return {shard, sample - first_[shard]};
}

int32_t SplitReader::label(int64_t sample) const {
  const auto [shard, local] = locate(sample);
  return shards_[shard].label(local);
}

std::string SplitReader::describe(int64_t sample) const {
  const auto [shard, local] = locate(sample);
  return shards_[shard].path() + " sample " + std::to_string(local) + " (" + split_ + " sample " +
         std::to_string(sample) + ")";
}

void SplitReader::read(int64_t sample, std::vector<uint8_t>& out) const {
  const auto [shard, local] = locate(sample);
  try {
    shards_[shard].read(local, out);
  } catch (
      const DataError& e) {  // name the global sample too; the message string is built only here
    throw DataError(e.what_happened(), describe(sample), e.hint());
  }
}

}  // namespace nostrum::io
