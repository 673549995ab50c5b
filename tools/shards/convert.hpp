// The converters behind nostrum-shards (imagenet, fashion-mnist, synthetic) and dataset
// verification, as a library so tests call them directly. Each writes a dataset directory (see
// io/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/dataset.hpp"
#include "io/shard.hpp"

namespace nostrum::shards {

struct ConvertOptions {
  std::string output;        // dataset directory to create
  double shard_mb = 128;     // a shard is closed once its payload reaches this many MB ...
  int64_t shard_images = 0;  // ... or this many images (0: no count limit)
  int threads = 0;           // worker threads (0: all cores)
  bool skip_bad = false;     // skip (and list in the manifest) bad inputs instead of failing
  bool overwrite = false;    // replace an existing dataset in `output`
  bool quiet = false;        // no progress lines on stdout
};

// ImageNet layout: input/train/<wnid>/*; input/val/<wnid>/* or input/val/* flat with val_labels
// (lines "<file>[,| ]<wnid> ...", e.g. Kaggle's LOC_val_solution.csv). Classes = sorted train
// wnids.
io::Manifest convert_imagenet(const std::string& input, const std::string& val_labels,
                              const ConvertOptions& options);

// Fashion-MNIST from the idx(.gz) files in input_dir (train-*, t10k-* -> splits train, val).
io::Manifest convert_fashion_mnist(const std::string& input_dir, const ConvertOptions& options);

struct SyntheticOptions {
  int classes = 10;
  int64_t train = 1000, val = 200;  // images per split
  int height = 64, width = 64, channels = 3;
  io::ImageKind kind = io::ImageKind::jpeg;
  float size_jitter = 0;  // jpeg: each side drawn from [1 - j, 1 + j] x its size
  int quality = 90;       // jpeg quality
  uint64_t seed = 1;
};
// N classes of images whose class is learnable (a class-specific oriented stripe pattern and tint
// plus noise).
io::Manifest convert_synthetic(const SyntheticOptions& synthetic, const ConvertOptions& options);

// Opens every shard of every split and checks its payload checksum; returns the samples checked.
int64_t verify_dataset(const std::string& dir, int threads);

// ---- the machinery the converters share
// -----------------------------------------------------------

// One shard to produce: `fill` appends samples (and skipped inputs) to the contents.
struct ShardJob {
  std::string split;
  std::function<void(io::ShardContents&, std::vector<io::SkippedInput>&)> fill;
};

// Prepares options.output: refuses an existing non-empty directory unless overwrite (then removes
// its manifest first, so an interrupted overwrite never looks complete, and its old shards).
void prepare_output(const ConvertOptions& options, const std::vector<std::string>& splits);

// Runs the jobs on options.threads threads, writes each shard as <split>/shard-<k>.h5, then the
// manifest (last). `manifest` carries kind, size, classes, statistics and pre-listed skips.
io::Manifest run_jobs(std::vector<ShardJob>& jobs, io::Manifest manifest, io::ImageKind kind,
                      const ConvertOptions& options);

int resolve_threads(int threads);

}  // namespace nostrum::shards
