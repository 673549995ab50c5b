// Loader: identical batches for any thread count (augmentation keyed by sample), evaluation
// covering every sample once over ranks with equal batch counts, raw evaluation = normalised
// pixels, and a bad sample re-thrown in the caller's thread naming the shard file and the sample.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "convert.hpp"
#include "io/jpeg.hpp"
#include "io/loader.hpp"
#include "nostrum/core/error.hpp"
#include "temp_dir.hpp"

using namespace nostrum;
using namespace nostrum::io;
namespace fs = std::filesystem;

namespace {

std::string make_dataset(const testing::TempDir& dir, ImageKind kind, int64_t train, int64_t val) {
  shards::SyntheticOptions s;
  s.classes = 5;
  s.train = train;
  s.val = val;
  s.kind = kind;
  s.height = kind == ImageKind::raw ? 9 : 60;
  s.width = kind == ImageKind::raw ? 7 : 80;
  s.size_jitter = kind == ImageKind::raw ? 0.0f : 0.4f;
  shards::ConvertOptions o;
  o.output = (dir.path() / to_string(kind)).string();
  o.quiet = true;
  o.threads = 2;
  o.shard_images = 13;
  shards::convert_synthetic(s, o);
  return o.output;
}

LoaderConfig jpeg_config(int threads) {
  LoaderConfig c;
  c.local_batch = 8;
  c.threads = threads;
  c.seed = 11;
  c.tail = data::TailPolicy::pad;
  c.augment.out_height = 24;
  c.augment.out_width = 20;
  c.augment.eval_resize = 28;
  return c;
}

struct Epoch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  std::vector<int64_t> samples;
  std::vector<int64_t> counts;
};

Epoch run_epoch(Loader& loader, int64_t epoch) {
  Epoch e;
  loader.start_epoch(epoch);
  Batch b;
  const size_t per_sample =
      static_cast<size_t>(loader.height() * loader.width() * loader.channels());
  while (loader.next(b)) {
    REQUIRE(b.index == static_cast<int64_t>(e.counts.size()));
    e.counts.push_back(b.count);
    e.images.insert(e.images.end(), b.images, b.images + b.count * per_sample);
    e.labels.insert(e.labels.end(), b.labels, b.labels + b.count);
    e.samples.insert(e.samples.end(), b.samples, b.samples + b.count);
  }
  REQUIRE(static_cast<int64_t>(e.counts.size()) == loader.batches_per_epoch());
  return e;
}

}  // namespace

TEST_CASE("loader: the same batches, bit for bit, for 1, 2 and 4 threads", "[loader]") {
  testing::TempDir dir("loader");
  const std::string data = make_dataset(dir, ImageKind::jpeg, 45, 10);
  const Manifest m = Manifest::read(data);
  Loader one(data, m, jpeg_config(1));
  const Epoch reference = run_epoch(one, 3);
  REQUIRE(reference.samples.size() == 48);  // pad: 6 full batches of 8
  for (int threads : {2, 4}) {
    LoaderConfig c = jpeg_config(threads);
    c.prefetch = 3;
    Loader loader(data, m, c);
    const Epoch e = run_epoch(loader, 3);
    REQUIRE(e.samples == reference.samples);
    REQUIRE(e.labels == reference.labels);
    REQUIRE(std::memcmp(e.images.data(), reference.images.data(),
                        e.images.size() * sizeof(float)) == 0);
  }
  // another epoch: another order and other crops of the same sample
  const Epoch next = run_epoch(one, 4);
  REQUIRE(next.samples != reference.samples);
  // the same (seed, epoch) again after a restart of the epoch midway
  one.start_epoch(3);
  Batch b;
  REQUIRE(one.next(b));
  const Epoch again = run_epoch(one, 3);
  REQUIRE(std::memcmp(again.images.data(), reference.images.data(),
                      again.images.size() * sizeof(float)) == 0);
  // normalised values are in a sane range
  for (float v : reference.images) {
    REQUIRE(v > -3.0f);
    REQUIRE(v < 3.0f);
  }
}

TEST_CASE("loader: an epoch started at batch k hands out the full epoch's batches from k on",
          "[loader]") {
  // A resumed run (checkpoint mid-epoch) starts the loader at the batch it stopped at.
  testing::TempDir dir("loader");
  const std::string data = make_dataset(dir, ImageKind::jpeg, 45, 10);
  const Manifest m = Manifest::read(data);
  Loader loader(data, m, jpeg_config(2));
  const Epoch full = run_epoch(loader, 3);
  const size_t per_sample =
      static_cast<size_t>(loader.height() * loader.width() * loader.channels());
  for (int64_t k : {int64_t{1}, int64_t{4}, loader.batches_per_epoch()}) {
    loader.start_epoch(3, k);
    Batch b;
    int64_t expected = k;
    size_t offset = static_cast<size_t>(k) * 8;
    while (loader.next(b)) {
      REQUIRE(b.index == expected++);
      for (int64_t i = 0; i < b.count; ++i) REQUIRE(b.samples[i] == full.samples[offset + i]);
      REQUIRE(std::memcmp(b.images, full.images.data() + offset * per_sample,
                          b.count * per_sample * sizeof(float)) == 0);
      offset += static_cast<size_t>(b.count);
    }
    REQUIRE(expected == loader.batches_per_epoch());
  }
}

TEST_CASE("loader: a sample's augmented image does not depend on the rank count", "[loader]") {
  testing::TempDir dir("loader");
  const std::string data = make_dataset(dir, ImageKind::jpeg, 40, 5);
  const Manifest m = Manifest::read(data);
  const size_t per_sample = 24 * 20 * 3;
  std::map<int64_t, std::vector<float>> reference;
  {
    Loader one(data, m, jpeg_config(2));
    const Epoch e = run_epoch(one, 7);
    for (size_t k = 0; k < e.samples.size(); ++k)
      reference[e.samples[k]].assign(e.images.begin() + k * per_sample,
                                     e.images.begin() + (k + 1) * per_sample);
  }
  for (int ranks : {2, 4}) {
    std::set<int64_t> seen;
    for (int r = 0; r < ranks; ++r) {
      LoaderConfig c = jpeg_config(1 + r % 2);
      c.local_batch = 8 / ranks;  // the same global batch of 8
      c.rank = r;
      c.ranks = ranks;
      Loader loader(data, m, c);
      const Epoch e = run_epoch(loader, 7);
      for (size_t k = 0; k < e.samples.size(); ++k) {
        seen.insert(e.samples[k]);
        REQUIRE(reference.count(e.samples[k]) == 1);
        const std::vector<float> image(e.images.begin() + k * per_sample,
                                       e.images.begin() + (k + 1) * per_sample);
        REQUIRE(image == reference[e.samples[k]]);
      }
    }
    REQUIRE(seen.size() == reference.size());
  }
}

TEST_CASE("loader: evaluation covers every sample once over P ranks, equal batch counts",
          "[loader]") {
  testing::TempDir dir("loader");
  const std::string data = make_dataset(dir, ImageKind::jpeg, 20, 23);
  const Manifest m = Manifest::read(data);
  SplitReader reader(data, m, "val");
  for (int ranks : {1, 2, 3, 4}) {
    std::multiset<int64_t> seen;
    int64_t batches = -1;
    for (int r = 0; r < ranks; ++r) {
      LoaderConfig c = jpeg_config(2);
      c.split = "val";
      c.train = false;
      c.tail = data::TailPolicy::exact;
      c.local_batch = 4;
      c.rank = r;
      c.ranks = ranks;
      Loader loader(data, m, c);
      const Epoch e = run_epoch(loader, 0);
      if (batches < 0) batches = static_cast<int64_t>(e.counts.size());
      REQUIRE(static_cast<int64_t>(e.counts.size()) == batches);
      for (size_t k = 0; k < e.samples.size(); ++k) {
        seen.insert(e.samples[k]);
        REQUIRE(e.labels[k] == reader.label(e.samples[k]));
      }
    }
    REQUIRE(seen.size() == 23);
    for (int64_t s = 0; s < 23; ++s) REQUIRE(seen.count(s) == 1);
  }
}

TEST_CASE("loader: raw evaluation images are the normalised stored pixels", "[loader]") {
  testing::TempDir dir("loader");
  const std::string data = make_dataset(dir, ImageKind::raw, 30, 10);
  const Manifest m = Manifest::read(data);
  LoaderConfig c;
  c.split = "val";
  c.train = false;
  c.tail = data::TailPolicy::exact;
  c.local_batch = 4;
  c.threads = 2;
  c.augment.out_height = 9;
  c.augment.out_width = 7;
  // mean/std left empty: the manifest's statistics
  Loader loader(data, m, c);
  REQUIRE(loader.config().augment.mean == m.mean);
  SplitReader reader(data, m, "val");
  const Epoch e = run_epoch(loader, 0);
  REQUIRE(e.counts == std::vector<int64_t>{4, 4, 2});
  std::vector<uint8_t> pixels;
  for (size_t k = 0; k < e.samples.size(); ++k) {
    reader.read(e.samples[k], pixels);
    for (size_t p = 0; p < 9 * 7 * 3; ++p) {
      const float expected = (pixels[p] / 255.0f - m.mean[p % 3]) / m.std[p % 3];
      REQUIRE(e.images[k * 9 * 7 * 3 + p] == Approx(expected).margin(1e-5));
    }
  }
  // training (pad-crop + flip): same shapes, different pixels, still deterministic
  c.split = "train";
  c.train = true;
  c.tail = data::TailPolicy::drop;
  Loader train(data, m, c);
  const Epoch a = run_epoch(train, 1), b = run_epoch(train, 1);
  REQUIRE(a.images == b.images);
  REQUIRE(a.samples.size() == 28);  // drop: 7 full batches of 4
  // a raw loader whose output size differs from the images is an option error
  c.augment.out_height = 28;
  REQUIRE_THROWS_AS(Loader(data, m, c), OptionError);
}

TEST_CASE("loader: a bad sample stops next() with the file and sample named", "[loader][corrupt]") {
  testing::TempDir dir("loader");
  fs::create_directories(dir.path() / "train");
  ShardContents contents;
  std::vector<uint8_t> pixels(32 * 32 * 3, 100);
  const std::vector<uint8_t> good = encode_jpeg(pixels.data(), 32, 32, 3, 90);
  for (int i = 0; i < 12; ++i) {
    if (i == 5) {
      std::vector<uint8_t> bad(good.begin(), good.begin() + good.size() / 3);  // truncated JPEG
      contents.add(bad.data(), bad.size(), 0);
    } else {
      contents.add(good.data(), good.size(), i % 2);
    }
  }
  write_shard(dir.str() + "/train/shard-00000.h5", contents);
  Manifest m;
  m.classes = {"a", "b"};
  m.splits.push_back({"train", 12, {{"train/shard-00000.h5", 12}}, {}});
  m.write(dir.str());
  LoaderConfig c = jpeg_config(3);
  c.local_batch = 4;
  c.train = false;
  c.tail = data::TailPolicy::exact;
  Loader loader(dir.str(), Manifest::read(dir.str()), c);
  loader.start_epoch(0);
  Batch b;
  REQUIRE(loader.next(b));  // samples 0..3
  REQUIRE_THROWS_AS(loader.next(b), DataError);
  loader.start_epoch(0);
  REQUIRE(loader.next(b));
  REQUIRE_THROWS_WITH(
      loader.next(b),
      Catch::Contains("JPEG") && Catch::Contains("shard-00000.h5 sample 5 (train sample 5)"));
}
