// nostrum-shards' converters on generated inputs: an ImageNet-style tree (JPEGs of several sizes,
// greyscale and CMYK), every bad-input case (corrupt, truncated, non-image, empty class,
// unreadable), refusal to overwrite, Fashion-MNIST from the Debian package, synthetic data.
#include <catch2/catch.hpp>

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "convert.hpp"
#include "io/jpeg.hpp"
#include "io/split_reader.hpp"
#include "nostrum/core/error.hpp"
#include "temp_dir.hpp"

using namespace nostrum;
using namespace nostrum::io;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> make_jpeg(int h, int w, int channels, int seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(h) * w * channels);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>((i * 13 + seed * 29) % 251);
  return encode_jpeg(pixels.data(), h, w, channels, 85);
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

// train/<wnid>/ with 3 classes (created out of order), 4 images each of different sizes and colour
// kinds; val/ flat with a label file (or in class folders).
void make_tree(const fs::path& root, bool flat_val) {
  const char* wnids[] = {"n03000000", "n01000000", "n02000000"};
  int seed = 0;
  for (const char* wnid : wnids) {
    for (int i = 0; i < 4; ++i, ++seed) {
      const int channels = i == 1 ? 1 : i == 2 ? 4 : 3;  // grey, CMYK, RGB
      write_file(root / "train" / wnid / (std::string(wnid) + "_" + std::to_string(i) + ".JPEG"),
                 make_jpeg(20 + 17 * i, 30 + 11 * seed, channels, seed));
    }
  }
  std::ofstream labels;
  if (flat_val) labels.open(root / "val_labels.csv");
  if (flat_val) labels << "ImageId,PredictionString\n";
  for (int i = 0; i < 6; ++i) {
    const std::string wnid = wnids[i % 3];
    const std::string name = "ILSVRC2012_val_0000000" + std::to_string(i);
    if (flat_val) {
      write_file(root / "val" / (name + ".JPEG"), make_jpeg(40, 50 + i, 3, 100 + i));
      labels << name << "," << wnid << " 1 2 3 4\n";
    } else {
      write_file(root / "val" / wnid / (name + ".JPEG"), make_jpeg(40, 50 + i, 3, 100 + i));
    }
  }
}

shards::ConvertOptions quiet_options(const fs::path& out) {
  shards::ConvertOptions o;
  o.output = out.string();
  o.quiet = true;
  o.threads = 3;
  o.shard_images = 5;  // several shards even for a tiny tree
  return o;
}

}  // namespace

TEST_CASE("convert imagenet: classes sorted by wnid, bytes and labels preserved", "[convert]") {
  for (bool flat_val : {true, false}) {
    testing::TempDir dir("imagenet");
    make_tree(dir.path() / "in", flat_val);
    const auto options = quiet_options(dir.path() / "out");
    const std::string labels = flat_val ? (dir.path() / "in" / "val_labels.csv").string() : "";
    const Manifest m = shards::convert_imagenet((dir.path() / "in").string(), labels, options);
    REQUIRE(m.classes == std::vector<std::string>{"n01000000", "n02000000", "n03000000"});
    const Manifest back = Manifest::read(options.output);
    REQUIRE(back.split("train").count == 12);
    REQUIRE(back.split("val").count == 6);
    REQUIRE(back.split("train").shards.size() == 3);  // 12 images, 5 per shard
    SplitReader train(options.output, back, "train");
    std::vector<uint8_t> bytes;
    // files are taken in sorted (class, name) order: sample k is class k / 4, image k % 4
    for (int k = 0; k < 12; ++k) {
      const std::string wnid = m.classes[static_cast<size_t>(k / 4)];
      const auto expected = read_file(dir.path() / "in" / "train" / wnid /
                                      (wnid + "_" + std::to_string(k % 4) + ".JPEG"));
      train.read(k, bytes);
      REQUIRE(train.label(k) == k / 4);
      REQUIRE(std::vector<uint8_t>(bytes.begin(), bytes.begin() + expected.size()) == expected);
    }
    // val_0000000i has class wnids[i % 3] = n03, n01, n02 -> label 2, 0, 1. Taken in sorted path
    // order: flat, image i is sample i; in class folders, (label, i) order.
    const int label_of_image[] = {2, 0, 1};
    std::vector<int> images = {0, 1, 2, 3, 4, 5};
    if (!flat_val)
      std::stable_sort(images.begin(), images.end(),
                       [&](int a, int b) { return label_of_image[a % 3] < label_of_image[b % 3]; });
    SplitReader val(options.output, back, "val");
    for (int k = 0; k < 6; ++k) {
      const int i = images[static_cast<size_t>(k)], label = label_of_image[i % 3];
      const std::string name = "ILSVRC2012_val_0000000" + std::to_string(i) + ".JPEG";
      const fs::path in_val = dir.path() / "in" / "val";
      const auto expected = read_file(flat_val ? in_val / name : in_val / m.classes[label] / name);
      INFO((flat_val ? "flat" : "class-folder") << " val sample " << k << " = " << name);
      REQUIRE(!expected.empty());
      REQUIRE(val.label(k) == label);
      val.read(k, bytes);
      REQUIRE(bytes == expected);
    }
    REQUIRE(shards::verify_dataset(options.output, 2) == 18);
  }
}

TEST_CASE("jpeg: greyscale and CMYK decode to RGB", "[convert][jpeg]") {
  JpegDecoder decoder;
  std::vector<uint8_t> pixels;
  int h = 0, w = 0;
  const std::vector<uint8_t> grey = make_jpeg(33, 47, 1, 1);
  REQUIRE(decoder.header(grey.data(), grey.size(), "grey").grey);
  decoder.decode_rgb(grey.data(), grey.size(), 1, pixels, h, w, "grey");
  REQUIRE(h == 33);
  REQUIRE(w == 47);
  REQUIRE(pixels[0] == pixels[1]);
  REQUIRE(pixels[1] == pixels[2]);
  // a failure leaves the decoder usable: a good image right after a bad one decodes (libjpeg-turbo
  // 2.1.5 keeps a handle broken after a header cut inside a Huffman table)
  std::vector<uint8_t> flat(32 * 32 * 3, 100);
  const std::vector<uint8_t> good = encode_jpeg(flat.data(), 32, 32, 3, 90);
  const std::vector<uint8_t> bad(good.begin(), good.begin() + 214);  // inside the DHT segments
  for (int round = 0; round < 2; ++round) {
    REQUIRE_THROWS_AS(decoder.decode_rgb(bad.data(), bad.size(), 1, pixels, h, w, "bad"),
                      DataError);
    REQUIRE_THROWS_AS(decoder.header(bad.data(), bad.size(), "bad"), DataError);
    decoder.decode_rgb(good.data(), good.size(), 1, pixels, h, w, "good after bad");
    REQUIRE(h == 32);
    REQUIRE(int(pixels[0]) == Approx(100).margin(2));
  }
  // Constant inverted-CMYK colour (Adobe convention): C'=255, M'=128, Y'=0, K'=255 -> RGB (255,
  // 128, 0).
  std::vector<uint8_t> cmyk(16 * 16 * 4);
  for (size_t p = 0; p < 256; ++p) {
    cmyk[p * 4 + 0] = 255;
    cmyk[p * 4 + 1] = 128;
    cmyk[p * 4 + 2] = 0;
    cmyk[p * 4 + 3] = 255;
  }
  const std::vector<uint8_t> jpeg = encode_jpeg(cmyk.data(), 16, 16, 4, 95);
  REQUIRE(decoder.header(jpeg.data(), jpeg.size(), "cmyk").cmyk);
  decoder.decode_rgb(jpeg.data(), jpeg.size(), 2, pixels, h, w, "cmyk");
  REQUIRE(h == 8);
  REQUIRE(w == 8);
  REQUIRE(std::abs(int(pixels[0]) - 255) <= 4);
  REQUIRE(std::abs(int(pixels[1]) - 128) <= 4);
  REQUIRE(std::abs(int(pixels[2]) - 0) <= 4);
}

TEST_CASE("convert imagenet: each bad input is a clear error, or a counted, listed skip",
          "[convert][bad]") {
  struct Case {
    std::string name;
    std::function<std::string(const fs::path&)> damage;  // returns the path the error must name
    std::string message;
  };
  const std::vector<Case> cases = {
      {"corrupt JPEG",
       [](const fs::path& in) {
         const fs::path p = in / "train" / "n01000000" / "n01000000_2.JPEG";
         auto bytes = read_file(p);
         for (size_t k = bytes.size() / 3; k < bytes.size() - 2; k += 5)
           bytes[k] = 0xff;  // markers everywhere
         write_file(p, bytes);
         return p.string();
       },
       "JPEG"},
      {"truncated JPEG",
       [](const fs::path& in) {
         const fs::path p = in / "train" / "n02000000" / "n02000000_3.JPEG";
         auto bytes = read_file(p);
         bytes.resize(bytes.size() / 2);
         write_file(p, bytes);
         return p.string();
       },
       "truncated"},
      {"non-image file",
       [](const fs::path& in) {
         const fs::path p = in / "train" / "n02000000" / "notes.txt";
         write_file(p, std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o'});
         return p.string();
       },
       "not a JPEG"},
      {"empty class folder",
       [](const fs::path& in) {
         const fs::path p = in / "train" / "n01500000";
         fs::create_directories(p);
         return p.string();
       },
       "empty class folder"},
      {"unreadable entry (a link loop)",
       [](const fs::path& in) {
         const fs::path p = in / "train" / "n03000000" / "loop.JPEG";
         fs::create_symlink(p, p);
         return p.string();
       },
       "cannot open"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      testing::TempDir dir("bad");
      make_tree(dir.path() / "in", false);
      const std::string named = c.damage(dir.path() / "in");
      auto options = quiet_options(dir.path() / "out");
      REQUIRE_THROWS_WITH(shards::convert_imagenet((dir.path() / "in").string(), "", options),
                          Catch::Contains(c.message) && Catch::Contains(named));
      // a failed conversion leaves nothing that looks like a dataset
      REQUIRE_FALSE(fs::exists(dir.path() / "out" / kManifestName));
      REQUIRE_THROWS_AS(Manifest::read(options.output), IoError);

      options.skip_bad = true;
      options.overwrite = true;
      const Manifest m = shards::convert_imagenet((dir.path() / "in").string(), "", options);
      const Manifest back = Manifest::read(options.output);
      const SplitInfo& train = back.split("train");
      REQUIRE(train.skipped.size() == 1);
      REQUIRE(train.skipped[0].path == named);
      REQUIRE(train.skipped[0].reason.find(c.message) != std::string::npos);
      const bool lost_image = c.name == "corrupt JPEG" || c.name == "truncated JPEG";
      REQUIRE(train.count == (lost_image ? 11 : 12));
      REQUIRE(back.split("val").count == 6);
      (void)m;
    }
  }
}

// The unreadable-directory check, run by a user that mode 000 stops: the conversion fails naming
// the directory, and with --skip-bad leaves that class out. 0 when it holds, else a message on
// stderr and 1.
int check_unreadable_directory(const fs::path& root) {
  const fs::path locked = root / "in" / "train" / "n02000000";
  auto options = quiet_options(root / "out");
  try {
    shards::convert_imagenet((root / "in").string(), "", options);
    std::fprintf(stderr, "the conversion of a tree with an unreadable class folder succeeded\n");
    return 1;
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find("cannot read directory") == std::string::npos ||
        what.find(locked.string()) == std::string::npos) {
      std::fprintf(stderr, "the error does not name the unreadable folder %s: %s\n", locked.c_str(),
                   what.c_str());
      return 1;
    }
  }
  options.skip_bad = options.overwrite = true;
  shards::convert_imagenet((root / "in").string(), "", options);
  const int64_t count = Manifest::read(options.output).split("train").count;
  if (count != 8) {
    std::fprintf(stderr, "--skip-bad kept %lld training images, expected 8\n",
                 static_cast<long long>(count));
    return 1;
  }
  return 0;
}

// Runs check(root) in a child process as uid and gid 65534 (nobody), root's tree handed to that
// user first: root reads any directory whatever its mode. Returns the child's status, 77 when it
// could not become that user.
int run_as_nobody(const fs::path& root, int (*check)(const fs::path&)) {
  constexpr uid_t kNobody = 65534;
  REQUIRE(::lchown(root.c_str(), kNobody, kNobody) == 0);
  for (const auto& entry : fs::recursive_directory_iterator(root))
    REQUIRE(::lchown(entry.path().c_str(), kNobody, kNobody) == 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
      std::fprintf(stderr, "cannot become uid 65534: %s\n", std::strerror(errno));
      ::_exit(77);
    }
    int rc = 1;
    try {
      rc = check(root);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_CASE("convert imagenet: unreadable directory (checked as a non-root user)", "[convert][bad]") {
  testing::TempDir dir("bad");
  make_tree(dir.path() / "in", false);
  const fs::path locked = dir.path() / "in" / "train" / "n02000000";
  fs::permissions(locked, fs::perms::none);
  const int rc = ::geteuid() == 0 ? run_as_nobody(dir.path(), check_unreadable_directory)
                                  : check_unreadable_directory(dir.path());
  fs::permissions(locked, fs::perms::owner_all);
  if (rc == 77) {
    // Not passed: reported skipped (the unit tests' SKIP_RETURN_CODE) with the reason.
    std::printf(
        "SKIPPED: running as root and cannot become uid 65534 (see above): mode 000 does "
        "not stop root, so no directory is unreadable here\n");
    std::fflush(stdout);
    std::error_code ec;
    fs::remove_all(dir.path(), ec);
    std::_Exit(77);
  }
  CHECK(rc == 0);
}

TEST_CASE("convert: an existing dataset is kept unless --overwrite", "[convert]") {
  testing::TempDir dir("overwrite");
  shards::SyntheticOptions s;
  s.train = 20;
  s.val = 5;
  s.height = s.width = 16;
  auto options = quiet_options(dir.path() / "out");
  shards::convert_synthetic(s, options);
  REQUIRE_THROWS_WITH(shards::convert_synthetic(s, options),
                      Catch::Contains("not empty") && Catch::Contains("--overwrite"));
  REQUIRE(Manifest::read(options.output).split("train").count == 20);
  options.overwrite = true;
  s.train = 12;
  shards::convert_synthetic(s, options);
  const Manifest m = Manifest::read(options.output);
  REQUIRE(m.split("train").count == 12);
  // no stale shard from the first run is left behind
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir.path() / "out" / "train"))
    files += f.path().extension() == ".h5";
  REQUIRE(files == static_cast<int>(m.split("train").shards.size()));
}

TEST_CASE("convert fashion-mnist: the Debian package's files as raw shards", "[convert]") {
  const std::string source = "/usr/share/datasets/fashion-mnist";
  REQUIRE(fs::exists(source + "/train-images-idx3-ubyte.gz"));  // installed by tools/bootstrap
  testing::TempDir dir("fmnist");
  auto options = quiet_options(dir.path() / "out");
  options.shard_images = 0;
  options.shard_mb = 16;
  const Manifest m = shards::convert_fashion_mnist(source, options);
  REQUIRE(m.kind == ImageKind::raw);
  REQUIRE(m.height == 28);
  REQUIRE(m.channels == 1);
  REQUIRE(m.classes.size() == 10);
  REQUIRE(m.split("train").count == 60000);
  REQUIRE(m.split("val").count == 10000);
  REQUIRE(m.split("train").shards.size() == 3);        // 16 MB of 784-byte images: 20408 per shard
  REQUIRE(m.mean[0] == Approx(0.2860).margin(0.001));  // the published Fashion-MNIST statistics
  REQUIRE(m.std[0] == Approx(0.3530).margin(0.001));
  SplitReader train(options.output, Manifest::read(options.output), "train");
  REQUIRE(train.label(0) == 9);  // the first training image is an ankle boot
  REQUIRE(train.label(1) == 0);

  // a truncated idx file is a clear error naming it
  testing::TempDir broken("fmnist-bad");
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(source + "/" + f, broken.path() / f);
  fs::resize_file(broken.path() / "t10k-images-idx3-ubyte.gz", 5000);
  options.output = (broken.path() / "out").string();
  REQUIRE_THROWS_WITH(shards::convert_fashion_mnist(broken.str(), options),
                      Catch::Contains("truncated") && Catch::Contains("t10k-images"));
}

TEST_CASE("convert synthetic: raw and JPEG kinds hold their counts and sizes", "[convert]") {
  testing::TempDir dir("synthetic");
  shards::SyntheticOptions s;
  s.classes = 4;
  s.train = 30;
  s.val = 8;
  s.height = 12;
  s.width = 10;
  s.kind = ImageKind::raw;
  auto options = quiet_options(dir.path() / "raw");
  const Manifest raw = shards::convert_synthetic(s, options);
  REQUIRE(raw.height == 12);
  REQUIRE(raw.width == 10);
  REQUIRE(raw.split("train").count == 30);
  SplitReader reader(options.output, Manifest::read(options.output), "train");
  REQUIRE(reader.shards()[0].sample_size(0) == 12 * 10 * 3);
  s.kind = ImageKind::jpeg;
  s.size_jitter = 0.5f;
  options.output = (dir.path() / "jpeg").string();
  shards::convert_synthetic(s, options);
  REQUIRE(shards::verify_dataset(options.output, 1) == 38);
  s.size_jitter = 1.5f;
  options.output = (dir.path() / "bad").string();
  REQUIRE_THROWS_AS(shards::convert_synthetic(s, options), OptionError);
}
