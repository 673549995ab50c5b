// nostrum-shards fashion-mnist: the idx(.gz) files (big-endian header, then uint8 pixels (N, 28,
// 28) or labels (N)) -> raw-pixel shards, with the training split's pixel mean and std in the
// manifest.
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "convert.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::shards {

namespace {

struct Idx {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
};

// Reads an idx file (gzip or plain: gzread handles both). magic: 0x803 images, 0x801 labels.
Idx read_idx(const std::string& path, uint32_t magic) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  NOSTRUM_CHECK(file, IoError, "cannot open idx file", path,
                "install dataset-fashion-mnist or pass --input");
  const auto read_u32 = [&]() {
    unsigned char b[4];
    NOSTRUM_CHECK(gzread(file.get(), b, 4) == 4, DataError, "truncated idx header", path);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  };
  const uint32_t found = read_u32();
  NOSTRUM_CHECK(found == magic, DataError, "wrong idx magic number " + std::to_string(found), path);
  Idx idx;
  size_t total = 1;
  for (uint32_t d = 0; d < (magic & 0xff); ++d) {
    idx.dims.push_back(read_u32());
    total *= idx.dims.back();
  }
  idx.data.resize(total);
  size_t done = 0;
  while (done < total) {
    const int got = gzread(file.get(), idx.data.data() + done,
                           static_cast<unsigned>(std::min<size_t>(total - done, 1 << 30)));
    NOSTRUM_CHECK(
        got > 0, DataError,
        "truncated idx file: " + std::to_string(done) + " of " + std::to_string(total) + " bytes",
        path);
    done += static_cast<size_t>(got);
  }
  return idx;
}

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    const std::string path = dir + "/" + stem + suffix;
    if (std::filesystem::exists(path)) return path;
  }
  throw IoError("idx file not found", dir + "/" + stem + "[.gz]",
                "install dataset-fashion-mnist or pass --input");
}

}  // namespace

io::Manifest convert_fashion_mnist(const std::string& input_dir, const ConvertOptions& options) {
  struct Split {
    std::string name, stem;
    std::shared_ptr<Idx> images, labels;
  };
  std::vector<Split> splits{{"train", "train", nullptr, nullptr},
                            {"val", "t10k", nullptr, nullptr}};
  for (Split& s : splits) {
    const std::string image_path = find_file(input_dir, s.stem + "-images-idx3-ubyte");
    const std::string label_path = find_file(input_dir, s.stem + "-labels-idx1-ubyte");
    s.images = std::make_shared<Idx>(read_idx(image_path, 0x803));
    s.labels = std::make_shared<Idx>(read_idx(label_path, 0x801));
    NOSTRUM_CHECK(s.images->dims[0] == s.labels->dims[0], DataError,
                  "images and labels differ in count", image_path + " / " + label_path);
    NOSTRUM_CHECK(s.images->dims[1] == 28 && s.images->dims[2] == 28, DataError,
                  "images are not 28x28", image_path);
    for (uint8_t label : s.labels->data)
      NOSTRUM_CHECK(label < 10, DataError,
                    "label " + std::to_string(label) + " out of range [0, 10)", label_path);
  }
  io::Manifest manifest;
  manifest.kind = io::ImageKind::raw;
  manifest.height = manifest.width = 28;
  manifest.channels = 1;
  manifest.classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  double sum = 0, sum_squares = 0;
  for (uint8_t p : splits[0].images->data) {
    const double v = p / 255.0;
    sum += v;
    sum_squares += v * v;
  }
  const double n = static_cast<double>(splits[0].images->data.size());
  const double mean = sum / n;
  manifest.mean = {static_cast<float>(mean)};
  manifest.std = {static_cast<float>(std::sqrt(std::max(0.0, sum_squares / n - mean * mean)))};
  for (const Split& s : splits) manifest.splits.push_back({s.name, 0, {}, {}});

  prepare_output(options, {"train", "val"});
  const int64_t per_shard = std::max<int64_t>(
      1, options.shard_images > 0 ? options.shard_images
                                  : static_cast<int64_t>(options.shard_mb * 1e6 / 784));
  std::vector<ShardJob> jobs;
  for (const Split& s : splits) {
    const int64_t count = s.labels->dims[0];
    for (int64_t begin = 0; begin < count; begin += per_shard) {
      const int64_t end = std::min(count, begin + per_shard);
      jobs.push_back(
          {s.name, [s, begin, end](io::ShardContents& c, std::vector<io::SkippedInput>&) {
             for (int64_t i = begin; i < end; ++i)
               c.add(s.images->data.data() + i * 784, 784, s.labels->data[static_cast<size_t>(i)]);
           }});
    }
  }
  return run_jobs(jobs, manifest, io::ImageKind::raw, options);
}

}  // namespace nostrum::shards
