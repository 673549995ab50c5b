// Shard format: write-then-read round trips (bytes, labels, counts) for JPEG and raw shards, and
// the corrupt-shard cases (bad bytes, truncation, wrong labels, missing/foreign files), each a
// clear error naming the file and the sample.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "io/dataset.hpp"
#include "io/shard.hpp"
#include "io/split_reader.hpp"
#include "nostrum/core/error.hpp"
#include "temp_dir.hpp"

using namespace nostrum;
using namespace nostrum::io;

namespace {

ShardContents jpeg_like_contents(int n, int classes) {
  ShardContents c;
  c.kind = ImageKind::jpeg;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> bytes(static_cast<size_t>(10 + i * 13));
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 31 + i);
    c.add(bytes.data(), bytes.size(), i % classes);
  }
  return c;
}

ShardContents raw_contents(int n, int classes) {
  ShardContents c;
  c.kind = ImageKind::raw;
  c.height = 3;
  c.width = 2;
  c.channels = 1;
  for (int i = 0; i < n; ++i) {
    const uint8_t pixels[6] = {uint8_t(i),     uint8_t(i + 1), uint8_t(i + 2),
                               uint8_t(i + 3), uint8_t(i + 4), uint8_t(i + 5)};
    c.add(pixels, 6, (i * 3) % classes);
  }
  return c;
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("shard: JPEG-kind round trip gives the same bytes, labels and count", "[shard]") {
  testing::TempDir dir("shard");
  const ShardContents c = jpeg_like_contents(37, 5);
  const std::string path = dir.str() + "/a.h5";
  write_shard(path, c);
  REQUIRE(std::filesystem::exists(path));
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
  ShardReader r(path, 5);
  REQUIRE(r.count() == 37);
  REQUIRE(r.kind() == ImageKind::jpeg);
  std::vector<uint8_t> out;
  for (int i = 0; i < 37; ++i) {
    r.read(i, out);
    const std::vector<uint8_t> expected(c.images.begin() + c.offsets[i],
                                        c.images.begin() + c.offsets[i] + c.lengths[i]);
    REQUIRE(r.sample_size(i) == expected.size());
    REQUIRE(std::vector<uint8_t>(out.begin(), out.begin() + expected.size()) == expected);
    REQUIRE(r.label(i) == i % 5);
  }
  r.verify_payload();
}

TEST_CASE("shard: raw-kind round trip and dataset manifest round trip", "[shard]") {
  testing::TempDir dir("shard");
  std::filesystem::create_directories(dir.path() / "train");
  write_shard(dir.str() + "/train/s0.h5", raw_contents(10, 4));
  write_shard(dir.str() + "/train/s1.h5", raw_contents(7, 4));
  Manifest m;
  m.kind = ImageKind::raw;
  m.height = 3;
  m.width = 2;
  m.channels = 1;
  m.classes = {"a b", "c", "d", "e"};
  m.mean = {0.25f};
  m.std = {0.5f};
  m.splits.push_back(
      {"train", 17, {{"train/s0.h5", 10}, {"train/s1.h5", 7}}, {{"in/x y.jpg", "truncated JPEG"}}});
  m.write(dir.str());
  const Manifest back = Manifest::read(dir.str());
  REQUIRE(back.classes == m.classes);
  REQUIRE(back.mean == m.mean);
  REQUIRE(back.split("train").count == 17);
  REQUIRE(back.split("train").skipped.size() == 1);
  REQUIRE(back.split("train").skipped[0].path == "in/x y.jpg");
  REQUIRE(back.split("train").skipped[0].reason == "truncated JPEG");
  REQUIRE_THROWS_WITH(back.split("val"),
                      Catch::Contains("no split 'val'") && Catch::Contains("train"));

  SplitReader reader(dir.str(), back, "train");
  REQUIRE(reader.count() == 17);
  std::vector<uint8_t> out;
  reader.read(12, out);  // shard 1, local sample 2
  REQUIRE(out[0] == 2);
  REQUIRE(out[5] == 7);
  REQUIRE(reader.label(12) == (2 * 3) % 4);
  REQUIRE(reader.describe(12).find("s1.h5 sample 2 (train sample 12)") != std::string::npos);
}

TEST_CASE("shard: a corrupted sample byte is a checksum error naming file and sample",
          "[shard][corrupt]") {
  testing::TempDir dir("shard");
  const std::string path = dir.str() + "/a.h5";
  const ShardContents c = jpeg_like_contents(20, 3);
  write_shard(path, c);
  uint64_t payload = 0;
  {
    // find the payload: the first sample's bytes in the file
    std::ifstream f(path, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string first(c.images.begin(), c.images.begin() + c.lengths[0]);
    payload = all.find(first);
    REQUIRE(payload != std::string::npos);
  }
  flip_byte(path, payload + c.offsets[7] + 3);  // inside sample 7
  ShardReader r(path, 3);
  std::vector<uint8_t> out;
  r.read(6, out);  // neighbours are intact
  r.read(8, out);
  REQUIRE_THROWS_AS(r.read(7, out), DataError);
  REQUIRE_THROWS_WITH(r.read(7, out),
                      Catch::Contains("checksum") && Catch::Contains(path + " sample 7"));
  REQUIRE_THROWS_WITH(r.verify_payload(),
                      Catch::Contains("payload checksum") && Catch::Contains(path));
}

TEST_CASE("shard: truncated, foreign, missing and mislabelled shards are clear errors",
          "[shard][corrupt]") {
  testing::TempDir dir("shard");
  const std::string path = dir.str() + "/a.h5";
  write_shard(path, jpeg_like_contents(50, 3));
  const auto size = std::filesystem::file_size(path);

  SECTION("truncated file") {
    std::filesystem::resize_file(path, size / 2);
    REQUIRE_THROWS_WITH(
        [&] {
          ShardReader r(path, 3);
          std::vector<uint8_t> out;
          for (int i = 0; i < r.count(); ++i) r.read(i, out);
        }(),
        Catch::Contains(path));
  }
  SECTION("truncated to a few bytes") {
    std::filesystem::resize_file(path, 100);
    REQUIRE_THROWS_AS(ShardReader(path, 3), DataError);
  }
  SECTION("not an HDF5 file") {
    std::ofstream(path, std::ios::trunc) << "hello, I am not a shard";
    REQUIRE_THROWS_WITH(ShardReader(path, 3),
                        Catch::Contains("not an HDF5 file") && Catch::Contains(path));
  }
  SECTION("missing file") {
    std::filesystem::remove(path);
    REQUIRE_THROWS_AS(ShardReader(path, 3), IoError);
    REQUIRE_THROWS_WITH(ShardReader(path, 3), Catch::Contains("missing") && Catch::Contains(path));
  }
  SECTION("label out of range for the class count") {
    REQUIRE_THROWS_WITH(ShardReader(path, 2), Catch::Contains("label 2 out of range [0, 2)") &&
                                                  Catch::Contains(path + " sample 2"));
  }
  SECTION("garbage in the middle of the HDF5 metadata") {
    for (uint64_t offset = 0; offset < 2048; offset += 97) flip_byte(path, offset);
    // any typed error (the superblock or an object header is broken), never a crash
    REQUIRE_THROWS_AS(
        [&] {
          ShardReader r(path, 3);
          std::vector<uint8_t> out;
          for (int i = 0; i < r.count(); ++i) r.read(i, out);
          r.verify_payload();
        }(),
        Error);
  }
}

TEST_CASE("shard: a manifest that disagrees with its shards is refused", "[shard][corrupt]") {
  testing::TempDir dir("shard");
  std::filesystem::create_directories(dir.path() / "train");
  write_shard(dir.str() + "/train/s0.h5", raw_contents(10, 4));
  Manifest m;
  m.kind = ImageKind::raw;
  m.height = 3;
  m.width = 2;
  m.channels = 1;
  m.classes = {"a", "b", "c", "d"};
  m.splits.push_back({"train", 11, {{"train/s0.h5", 11}}, {}});
  m.write(dir.str());
  REQUIRE_THROWS_WITH(SplitReader(dir.str(), Manifest::read(dir.str()), "train"),
                      Catch::Contains("manifest says 11") && Catch::Contains("s0.h5"));
  m.splits[0] = {"train", 10, {{"train/s0.h5", 10}}, {}};
  m.width = 3;
  m.write(dir.str());
  REQUIRE_THROWS_WITH(SplitReader(dir.str(), Manifest::read(dir.str()), "train"),
                      Catch::Contains("image size"));
  m.width = 2;
  m.splits[0] = {"train", 10, {{"train/missing.h5", 10}}, {}};
  m.write(dir.str());
  REQUIRE_THROWS_AS(SplitReader(dir.str(), Manifest::read(dir.str()), "train"), IoError);
  std::ofstream(dir.str() + "/manifest.txt", std::ios::app) << "bogus line\n";
  REQUIRE_THROWS_WITH(Manifest::read(dir.str()), Catch::Contains("manifest.txt:"));
  std::filesystem::remove(dir.path() / "manifest.txt");
  REQUIRE_THROWS_AS(Manifest::read(dir.str()), IoError);
}
