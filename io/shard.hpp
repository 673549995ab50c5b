// One HDF5 shard: a contiguous uint8 `images` dataset (JPEG bytes back to back, or raw (N,H,W,C)
// pixels), per-sample `offsets`/`lengths` (JPEG), int32 `labels`, uint32 `sample_crc32`, and root
// attributes (format, format_version, image_kind, count, height/width/channels, payload_crc32).
// The reader keeps the small index in memory and preads sample bytes outside HDF5 (H5Dget_offset).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::io {

constexpr const char* kShardFormat = "nostrum-shard";
constexpr int64_t kShardFormatVersion = 1;

enum class ImageKind { jpeg, raw };
const char* to_string(ImageKind kind);
ImageKind parse_image_kind(const std::string& name, const std::string& where);  // DataError else

// Everything one shard holds, in memory (a shard is ~128 MB, written in one go).
struct ShardContents {
  ImageKind kind = ImageKind::jpeg;
  int height = 0, width = 0, channels = 0;  // raw: every image's size; jpeg: 0
  std::vector<uint8_t> images;              // jpeg: bytes back to back; raw: (N, H, W, C)
  std::vector<uint64_t> offsets;            // jpeg: (N) byte offset of sample i in images
  std::vector<uint32_t> lengths;            // jpeg: (N) byte length of sample i
  std::vector<int32_t> labels;              // (N)
  int64_t count() const { return static_cast<int64_t>(labels.size()); }
  // Appends one sample (jpeg: encoded bytes; raw: H*W*C pixels).
  void add(const uint8_t* bytes, size_t size, int32_t label);
};

// crc32 (zlib) of a byte range, continuing from crc (0 to start).
uint32_t crc32_of(const uint8_t* bytes, size_t size, uint32_t crc = 0);

// Writes `path` atomically: into path + ".partial", flushed and closed, then renamed. An
// interrupted write leaves only the .partial file, never a shard that looks complete. IoError on
// failure.
void write_shard(const std::string& path, const ShardContents& contents);

// A shard opened for reading: its index in memory, sample bytes read with pread (thread-safe).
class ShardReader {
 public:
  // Opens and validates the shard (format, version, kind, sizes, labels in [0, classes), offsets
  // within the payload); DataError/IoError naming the file otherwise.
  ShardReader(const std::string& path, int64_t num_classes);
  ~ShardReader();
  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&&) = delete;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  ImageKind kind() const { return kind_; }
  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return channels_; }
  int64_t count() const { return static_cast<int64_t>(labels_.size()); }
  int32_t label(int64_t i) const { return labels_[static_cast<size_t>(i)]; }
  size_t sample_size(int64_t i) const { return lengths_[static_cast<size_t>(i)]; }
  size_t max_sample_size() const { return max_length_; }

  // Reads sample i into out (resized to the sample's size; no allocation once its capacity holds
  // the largest sample) and checks its crc32; DataError naming the file and sample on a short read
  // or checksum mismatch. `where` names the sample in errors (default: "<path> sample <i>").
  void read(int64_t i, std::vector<uint8_t>& out, const std::string& where = {}) const;

  // Recomputes the whole payload's crc32 against the payload_crc32 attribute (nostrum-shards
  // verify).
  void verify_payload() const;

 private:
  std::string path_;
  int fd_ = -1;
  ImageKind kind_ = ImageKind::jpeg;
  int height_ = 0, width_ = 0, channels_ = 0;
  uint64_t payload_offset_ = 0;  // byte address of the images dataset in the file
  uint64_t payload_size_ = 0;
  uint32_t payload_crc_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> lengths_;
  std::vector<int32_t> labels_;
  std::vector<uint32_t> crcs_;
  size_t max_length_ = 0;
};

}  // namespace nostrum::io
