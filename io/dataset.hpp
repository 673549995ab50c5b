// A dataset directory: manifest.txt (format, image kind and size, classes, splits with their shard
// lists and counts, skipped inputs) next to one folder of HDF5 shards per split. Text, line based:
// the format is specified in io/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/shard.hpp"

namespace nostrum::io {

constexpr const char* kManifestName = "manifest.txt";
constexpr int64_t kManifestVersion = 1;

struct ShardInfo {
  std::string path;  // relative to the dataset directory, e.g. train/shard-00000.h5
  int64_t count = 0;
};

struct SkippedInput {
  std::string path;    // the input file or folder the converter left out (--skip-bad)
  std::string reason;  // why, e.g. "truncated JPEG"
};

struct SplitInfo {
  std::string name;   // "train", "val"
  int64_t count = 0;  // sum of its shards' counts
  std::vector<ShardInfo> shards;
  std::vector<SkippedInput> skipped;
};

struct Manifest {
  ImageKind kind = ImageKind::jpeg;
  int height = 0, width = 0, channels = 3;  // raw: stored size; jpeg: 0, 0, 3 (decoded to RGB)
  std::vector<std::string> classes;         // index = label; ImageNet: WordNet ids, sorted
  // Per-channel pixel mean and std of the training split in [0, 1] units (the loader's default
  // normalisation); empty when the converter did not compute them.
  std::vector<float> mean, std;
  std::vector<SplitInfo> splits;

  // The split called name; DataError listing the splits there are otherwise.
  const SplitInfo& split(const std::string& name) const;
  // Parses dir/manifest.txt; IoError if missing, DataError naming the line if malformed.
  static Manifest read(const std::string& dir);
  // Writes dir/manifest.txt atomically (temporary file + rename): the last step of a conversion.
  void write(const std::string& dir) const;
};

}  // namespace nostrum::io
