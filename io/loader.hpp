// Loader: the input pipeline of one split on one rank. Background threads read samples (pread),
// decode (libjpeg-turbo), augment and normalise into a ring of preallocated batch buffers, keeping
// `prefetch` batches ready; the trainer takes one with next() and hands it back by calling next()
// again. Images are float (n, H, W, C), labels int32 (n).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/dataset.hpp"
#include "io/split_reader.hpp"
#include "nostrum/core/arena.hpp"
#include "nostrum/data/augment.hpp"
#include "nostrum/data/sampler.hpp"

namespace nostrum::io {

struct LoaderConfig {
  std::string split = "train";
  int64_t local_batch = 32;  // B: samples per batch on this rank
  int rank = 0, ranks = 1;   // this rank and the number of ranks P
  uint64_t seed = 0;         // with the epoch, keys the permutation and every augmentation choice
  int threads = 2;           // loader threads (each reads, decodes and augments whole samples)
  int prefetch = 2;          // batches kept ready while the trainer holds one (>= 1; 2 by default)
  // Training: shuffled, random augmentation. Evaluation: identity order, centre crop (JPEG) or the
  // plain image (raw), no flip.
  bool train = true;
  data::TailPolicy tail = data::TailPolicy::drop;  // evaluation: use exact
  // Output size, channels, normalisation and augmentation parameters (`train` is overridden by the
  // field above). mean/std empty: the manifest's (dataset statistics), else ImageNet's.
  data::AugmentConfig augment;
};

// One batch, valid until the next call of next() or start_epoch().
struct Batch {
  float* images = nullptr;           // (count, H, W, C), count <= local_batch
  const int32_t* labels = nullptr;   // (count)
  const int64_t* samples = nullptr;  // (count) sample indices in the split
  int64_t count = 0;                 // 0 only for the empty trailing batches of TailPolicy::exact
  int64_t index = 0;                 // batch number in the epoch
};

struct LoaderStats {
  double wait_seconds = 0;  // time next() blocked waiting for data, since the last reset_stats()
  int64_t batches = 0;      // batches handed out since then
  int64_t samples = 0;      // samples handed out since then
};

class Loader {
 public:
  // Opens and validates the split's shards and allocates every buffer; starts the threads (idle
  // until start_epoch). OptionError for a bad config, DataError/IoError for a bad dataset.
  Loader(const std::string& dataset_dir, const Manifest& manifest, const LoaderConfig& config);
  ~Loader();  // stops and joins the threads
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts filling the epoch's batches (drops what is left of a previous epoch), from batch
  // first_batch on (a resumed run: the batches before it were trained before the checkpoint).
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // Blocks until the next batch is ready and hands it out (the previously handed-out buffer goes
  // back to the threads). Returns false after the epoch's last batch. Re-throws, in this thread,
  // the first error of a loader thread (its message names the shard file and the sample).
  bool next(Batch& batch);

  int64_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  int64_t samples_per_epoch() const { return sampler_.samples_per_rank(); }  // this rank's
  int64_t split_samples() const { return reader_.count(); }
  int height() const { return config_.augment.out_height; }
  int width() const { return config_.augment.out_width; }
  int channels() const { return config_.augment.out_channels; }
  const LoaderConfig& config() const { return config_; }
  LoaderStats stats() const;
  void reset_stats();

 private:
  struct Slot {
    Arena images;                  // (B, H, W, C)
    std::vector<int32_t> labels;   // (B)
    std::vector<int64_t> samples;  // (B)
    int64_t batch = -1;            // batch of the epoch this slot holds
    int64_t count = 0;             // samples in that batch
    int64_t done = 0;              // samples finished by the threads
    std::exception_ptr error;      // first failure of a thread on this batch
  };
  struct Scratch;  // per-thread buffers and JPEG decoder

  void work();                                                           // loader thread body
  void process(Scratch& scratch, Slot& slot, int64_t j, int64_t epoch);  // one sample -> slot[j]
  void stop_epoch(std::unique_lock<std::mutex>& lock);  // waits until no thread is busy

  LoaderConfig config_;
  SplitReader reader_;
  data::DistributedSampler sampler_;
  int64_t sample_floats_ = 0;  // H * W * C
  int64_t chunk_ = 1;          // samples a thread takes at once (more for small raw images)
  std::vector<Slot> slots_;    // prefetch + 1

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;   // threads wait here
  std::condition_variable batch_ready_;  // next() waits here
  bool stop_ = false;
  bool active_ = false;  // an epoch is being filled
  int64_t epoch_ = -1;
  int64_t next_batch_ = 0;   // next batch a thread will start on
  int64_t next_sample_ = 0;  // position in next_batch_
  int64_t released_ = 0;     // batches the trainer has handed back (slots free for reuse)
  int64_t next_out_ = 0;     // next batch next() hands out
  bool holding_ = false;     // the trainer holds batch next_out_ - 1
  int busy_ = 0;             // threads processing samples
  LoaderStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace nostrum::io
