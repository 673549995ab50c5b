// nostrum-shards synthetic: generated images with a learnable class signal (a class-specific stripe
// orientation/frequency and tint, plus noise), any size and count, as JPEG or raw shards.
#include <cmath>

#include "convert.hpp"
#include "io/jpeg.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/data/sample_rng.hpp"

namespace nostrum::shards {

namespace {

// Pixels (h, w, c) of image `index` of class `label`.
void generate(std::vector<uint8_t>& pixels, int h, int w, int c, int label, int classes,
              data::SampleRng& rng) {
  pixels.resize(static_cast<size_t>(h) * w * c);
  const float angle = 3.14159265f * label / classes;
  const float frequency = 2.0f + 3.0f * (label % 3);
  const float cx = std::cos(angle) * frequency / w, cy = std::sin(angle) * frequency / h;
  const float phase = rng.uniform(0.0f, 6.2831853f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float stripe = std::sin(6.2831853f * (cx * x + cy * y) + phase);
      for (int k = 0; k < c; ++k) {
        const float tint = 40.0f * std::cos(2.0943951f * k + angle * 2);
        const float v = 128.0f + 70.0f * stripe + tint + rng.uniform(-30.0f, 30.0f);
        pixels[(static_cast<size_t>(y) * w + x) * c + k] =
            static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  }
}

}  // namespace

io::Manifest convert_synthetic(const SyntheticOptions& s, const ConvertOptions& options) {
  NOSTRUM_CHECK(s.classes >= 2, OptionError, "need at least 2 classes", "--classes");
  NOSTRUM_CHECK(s.train > 0 && s.val >= 0, OptionError, "need train > 0 and val >= 0 images",
                "--train/--val");
  NOSTRUM_CHECK(s.height > 0 && s.width > 0, OptionError, "image size must be positive",
                "--height/--width");
  NOSTRUM_CHECK(s.channels == 1 || s.channels == 3, OptionError, "channels must be 1 or 3",
                "--channels");
  NOSTRUM_CHECK(s.kind == io::ImageKind::jpeg || s.size_jitter == 0, OptionError,
                "raw images have one fixed size: no size jitter", "--size-jitter");
  NOSTRUM_CHECK(s.size_jitter >= 0 && s.size_jitter < 1, OptionError,
                "size jitter must be in [0, 1)", "--size-jitter");
  io::Manifest manifest;
  manifest.kind = s.kind;
  manifest.channels = s.kind == io::ImageKind::jpeg ? 3 : s.channels;
  if (s.kind == io::ImageKind::raw) {
    manifest.height = s.height;
    manifest.width = s.width;
  }
  manifest.mean.assign(static_cast<size_t>(manifest.channels), 0.5f);
  manifest.std.assign(static_cast<size_t>(manifest.channels), 0.25f);
  for (int k = 0; k < s.classes; ++k) manifest.classes.push_back("class" + std::to_string(k));
  std::vector<std::string> splits{"train"};
  if (s.val > 0) splits.push_back("val");
  for (const std::string& name : splits) manifest.splits.push_back({name, 0, {}, {}});
  prepare_output(options, splits);

  const double bytes_per_image = s.kind == io::ImageKind::raw
                                     ? double(s.height) * s.width * s.channels
                                     : double(s.height) * s.width * s.channels * 0.15;
  const int64_t per_shard = std::max<int64_t>(
      1, options.shard_images > 0 ? options.shard_images
                                  : static_cast<int64_t>(options.shard_mb * 1e6 / bytes_per_image));
  std::vector<ShardJob> jobs;
  for (size_t split = 0; split < splits.size(); ++split) {
    const int64_t count = split == 0 ? s.train : s.val;
    for (int64_t begin = 0; begin < count; begin += per_shard) {
      const int64_t end = std::min(count, begin + per_shard);
      jobs.push_back(
          {splits[split],
           [s, split, begin, end](io::ShardContents& c, std::vector<io::SkippedInput>&) {
             std::vector<uint8_t> pixels;
             for (int64_t i = begin; i < end; ++i) {
               data::SampleRng rng(s.seed, split, static_cast<uint64_t>(i));
               const int label = static_cast<int>(rng.below(static_cast<uint64_t>(s.classes)));
               int h = s.height, w = s.width;
               if (s.size_jitter > 0) {
                 h = std::max(
                     8, static_cast<int>(h * rng.uniform(1 - s.size_jitter, 1 + s.size_jitter)));
                 w = std::max(
                     8, static_cast<int>(w * rng.uniform(1 - s.size_jitter, 1 + s.size_jitter)));
               }
               generate(pixels, h, w, s.channels, label, s.classes, rng);
               if (s.kind == io::ImageKind::raw) {
                 c.add(pixels.data(), pixels.size(), label);
               } else {
                 const std::vector<uint8_t> jpeg =
                     io::encode_jpeg(pixels.data(), h, w, s.channels, s.quality);
                 c.add(jpeg.data(), jpeg.size(), label);
               }
             }
           }});
    }
  }
  return run_jobs(jobs, manifest, s.kind, options);
}

}  // namespace nostrum::shards
