// Loader: threads claim chunks of samples of the batches in the prefetch window, fill the batch's
// slot, and the trainer's next() waits until its batch is complete.
#include "io/loader.hpp"

#include <algorithm>
#include <chrono>

#include "io/jpeg.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/data/sample_rng.hpp"

namespace nostrum::io {

namespace {

data::SamplerConfig sampler_config(const LoaderConfig& c, int64_t samples) {
  data::SamplerConfig s;
  s.samples = samples;
  s.local_batch = c.local_batch;
  s.rank = c.rank;
  s.ranks = c.ranks;
  s.seed = c.seed;
  s.shuffle = c.train;
  s.tail = c.tail;
  return s;
}

// Resolves defaults and checks the config against the dataset.
LoaderConfig resolve(LoaderConfig c, const Manifest& m) {
  NOSTRUM_CHECK(c.threads >= 1, OptionError, "loader threads must be >= 1", "threads");
  NOSTRUM_CHECK(c.prefetch >= 1, OptionError, "prefetch must be >= 1 batch", "prefetch");
  c.augment.train = c.train;
  if (m.kind == ImageKind::raw) {
    NOSTRUM_CHECK(c.augment.out_height == m.height && c.augment.out_width == m.width &&
                      c.augment.out_channels == m.channels,
                  OptionError,
                  "raw images are " + std::to_string(m.height) + "x" + std::to_string(m.width) +
                      "x" + std::to_string(m.channels) +
                      "; the loader's output must be the same size",
                  "output size");
  } else {
    NOSTRUM_CHECK(c.augment.out_channels == 3, OptionError, "JPEG datasets decode to 3 channels",
                  "output channels");
  }
  if (c.augment.mean.empty() && c.augment.std.empty()) {
    if (!m.mean.empty() && m.mean.size() == m.std.size()) {
      c.augment.mean = m.mean;
      c.augment.std = m.std;
    } else {
      c.augment.mean = {0.485f, 0.456f, 0.406f};
      c.augment.std = {0.229f, 0.224f, 0.225f};
    }
  }
  data::validate(c.augment);
  return c;
}

}  // namespace

struct Loader::Scratch {
  std::vector<uint8_t> bytes;   // one sample's stored bytes
  std::vector<uint8_t> pixels;  // decoded RGB (h, w, 3)
  JpegDecoder decoder;
};

Loader::Loader(const std::string& dataset_dir, const Manifest& manifest, const LoaderConfig& config)
    : config_(resolve(config, manifest)),
      reader_(dataset_dir, manifest, config.split),
      sampler_(sampler_config(config_, reader_.count())) {
  const auto& a = config_.augment;
  sample_floats_ = int64_t{a.out_height} * a.out_width * a.out_channels;
  chunk_ = manifest.kind == ImageKind::raw ? std::clamp<int64_t>(4096 / sample_floats_, 1, 32) : 1;
  slots_.resize(static_cast<size_t>(config_.prefetch + 1));
  for (Slot& slot : slots_) {
    slot.images = Arena(static_cast<size_t>(config_.local_batch * sample_floats_), "loader batch");
    slot.labels.resize(static_cast<size_t>(config_.local_batch));
    slot.samples.resize(static_cast<size_t>(config_.local_batch));
  }
  threads_.reserve(static_cast<size_t>(config_.threads));
  for (int t = 0; t < config_.threads; ++t) threads_.emplace_back([this] { work(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Loader::stop_epoch(std::unique_lock<std::mutex>& lock) {
  active_ = false;
  batch_ready_.wait(lock, [this] { return busy_ == 0; });
}

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  stop_epoch(lock);
  sampler_.set_epoch(epoch);  // no thread is busy: safe
  epoch_ = epoch;
  next_sample_ = 0;
  next_batch_ = released_ = next_out_ =
      std::max<int64_t>(0, std::min(first_batch, sampler_.batches_per_epoch()));
  holding_ = false;
  for (Slot& slot : slots_) {
    slot.batch = -1;
    slot.error = nullptr;
  }
  active_ = true;
  lock.unlock();
  work_ready_.notify_all();
}

void Loader::work() {
  Scratch scratch;
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t window = static_cast<int64_t>(slots_.size());
  for (;;) {
    work_ready_.wait(lock, [&] {
      return stop_ || (active_ && next_batch_ < sampler_.batches_per_epoch() &&
                       next_batch_ < released_ + window);
    });
    if (stop_) return;
    const int64_t b = next_batch_;
    Slot& slot = slots_[static_cast<size_t>(b % window)];
    if (next_sample_ == 0) {  // first thread on this batch: claim the slot
      slot.batch = b;
      slot.count = sampler_.batch(b, slot.samples.data());
      slot.done = 0;
      slot.error = nullptr;
    }
    const int64_t j0 = next_sample_;
    const int64_t j1 = std::min(slot.count, j0 + chunk_);
    next_sample_ = j1;
    if (next_sample_ >= slot.count) {
      ++next_batch_;
      next_sample_ = 0;
    }
    if (slot.count == 0) {  // an empty trailing batch (TailPolicy::exact)
      batch_ready_.notify_all();
      continue;
    }
    const int64_t epoch = epoch_;
    ++busy_;
    lock.unlock();
    std::exception_ptr error;
    for (int64_t j = j0; j < j1 && !error; ++j) {
      try {
        process(scratch, slot, j, epoch);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    --busy_;
    if (error && !slot.error) slot.error = error;
    slot.done += j1 - j0;
    if (slot.done == slot.count || error || busy_ == 0) batch_ready_.notify_all();
  }
}

void Loader::process(Scratch& s, Slot& slot, int64_t j, int64_t epoch) {
  const auto& a = config_.augment;
  const int64_t sample = slot.samples[static_cast<size_t>(j)];
  float* out = slot.images.data() + j * sample_floats_;
  slot.labels[static_cast<size_t>(j)] = reader_.label(sample);
  reader_.read(sample, s.bytes);
  data::SampleRng rng(config_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample));
  if (reader_.shards().front().kind() == ImageKind::raw) {
    const int h = a.out_height, w = a.out_width, c = a.out_channels;
    if (config_.train) {
      const data::PadCropChoice choice = data::draw_pad_crop(rng, a);
      data::pad_crop_normalise(out, s.bytes.data(), h, w, c, a.pad, choice.dy, choice.dx,
                               choice.flip, a);
    } else {
      data::pad_crop_normalise(out, s.bytes.data(), h, w, c, 0, 0, 0, false, a);
    }
    return;
  }
  try {  // decode errors get the shard file and sample named below (string built only on error)
    const JpegHeader header = s.decoder.header(s.bytes.data(), s.bytes.size(), "");
    data::CropBox box;
    bool flip = false;
    if (config_.train) {
      box = data::random_resized_crop(rng, header.height, header.width, a);
      flip = a.flip && (rng.next_u64() >> 63) != 0;
    } else {
      box = data::centre_crop(header.height, header.width, a);
    }
    // The largest DCT scaling that still leaves the crop at least the output size.
    int denominator = 8;
    while (denominator > 1 &&
           (box.height / denominator < a.out_height || box.width / denominator < a.out_width))
      denominator /= 2;
    int h = 0, w = 0;
    s.decoder.decode_rgb(s.bytes.data(), s.bytes.size(), denominator, s.pixels, h, w, "");
    const float sy = float(h) / header.height, sx = float(w) / header.width;
    const data::CropBox scaled{box.y * sy, box.x * sx, box.height * sy, box.width * sx};
    data::resample_normalise(out, s.pixels.data(), h, w, 3, scaled, flip, a);
  } catch (const DataError& e) {
    throw DataError(e.what_happened(), reader_.describe(sample), e.hint());
  }
}

bool Loader::next(Batch& batch) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  NOSTRUM_CHECK(epoch_ >= 0, OptionError, "start_epoch() must come before next()", "loader");
  if (holding_) {
    holding_ = false;
    ++released_;
    work_ready_.notify_all();
  }
  if (next_out_ >= sampler_.batches_per_epoch()) return false;
  const int64_t b = next_out_;
  Slot& slot = slots_[static_cast<size_t>(b % static_cast<int64_t>(slots_.size()))];
  batch_ready_.wait(lock, [&] {
    return !active_ || (slot.batch == b && (slot.done == slot.count || slot.error));
  });
  if (!active_ && !slot.error) {
    throw OptionError("next() after a loader error stopped the epoch", "loader",
                      "call start_epoch() first");
  }
  if (slot.error) {
    std::exception_ptr error = slot.error;
    stop_epoch(lock);  // let the other threads finish their sample before the trainer unwinds
    std::rethrow_exception(error);
  }
  ++next_out_;
  holding_ = true;
  batch.images = slot.images.data();
  batch.labels = slot.labels.data();
  batch.samples = slot.samples.data();
  batch.count = slot.count;
  batch.index = b;
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.batches += 1;
  stats_.samples += slot.count;
  return true;
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Loader::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = LoaderStats{};
}

}  // namespace nostrum::io
