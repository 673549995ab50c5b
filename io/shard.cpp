// Shard writer (atomic .partial + rename) and reader (HDF5 index, pread of sample bytes).
#include "io/shard.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/hdf5_util.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::io {

const char* to_string(ImageKind kind) {
  return kind == ImageKind::jpeg ? "jpeg" : "raw";
}

ImageKind parse_image_kind(const std::string& name, const std::string& where) {
  if (name == "jpeg") return ImageKind::jpeg;
  if (name == "raw") return ImageKind::raw;
  throw DataError("unknown image kind '" + name + "'", where, "expected jpeg or raw");
}

void ShardContents::add(const uint8_t* bytes, size_t size, int32_t label) {
  if (kind == ImageKind::jpeg) {
    offsets.push_back(images.size());
    lengths.push_back(static_cast<uint32_t>(size));
  }
  images.insert(images.end(), bytes, bytes + size);
  labels.push_back(label);
}

uint32_t crc32_of(const uint8_t* bytes, size_t size, uint32_t crc) {
  // zlib's crc32 takes uInt lengths: feed it in 1 GiB pieces.
  while (size > 0) {
    const size_t piece = std::min<size_t>(size, size_t{1} << 30);
    crc = static_cast<uint32_t>(::crc32(crc, bytes, static_cast<uInt>(piece)));
    bytes += piece;
    size -= piece;
  }
  return crc;
}

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// The sample checksum of sample i of a ShardContents.
uint32_t sample_crc(const ShardContents& c, size_t i, size_t raw_size) {
  if (c.kind == ImageKind::jpeg) return crc32_of(c.images.data() + c.offsets[i], c.lengths[i]);
  return crc32_of(c.images.data() + i * raw_size, raw_size);
}

}  // namespace

void write_shard(const std::string& path, const ShardContents& c) {
  const size_t n = c.labels.size();
  NOSTRUM_CHECK(n > 0, DataError, "refusing to write an empty shard", path);
  const size_t raw_size = static_cast<size_t>(c.height) * c.width * c.channels;
  if (c.kind == ImageKind::raw) {
    NOSTRUM_CHECK(raw_size > 0 && c.images.size() == n * raw_size, DataError,
                  "raw shard payload does not hold count x H x W x C bytes", path);
  } else {
    NOSTRUM_CHECK(c.offsets.size() == n && c.lengths.size() == n, DataError,
                  "jpeg shard needs one offset and length per sample", path);
  }
  std::vector<uint32_t> crcs(n);
  for (size_t i = 0; i < n; ++i) crcs[i] = sample_crc(c, i, raw_size);
  uint32_t payload_crc = crc32_of(c.images.data(), c.images.size());
  payload_crc =
      crc32_of(reinterpret_cast<const uint8_t*>(c.labels.data()), n * sizeof(int32_t), payload_crc);

  const std::string partial = path + ".partial";
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    H5Quiet quiet;
    H5Handle file(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    NOSTRUM_CHECK(file.valid(), IoError, "cannot create shard file", partial,
                  "check that the output directory is writable");
    const hid_t f = file.get();
    write_attribute(f, "format", std::string(kShardFormat));
    write_attribute(f, "format_version", kShardFormatVersion);
    write_attribute(f, "image_kind", std::string(to_string(c.kind)));
    write_attribute(f, "count", static_cast<int64_t>(n));
    write_attribute(f, "height", static_cast<int64_t>(c.height));
    write_attribute(f, "width", static_cast<int64_t>(c.width));
    write_attribute(f, "channels", static_cast<int64_t>(c.channels));
    write_attribute(f, "payload_crc32", static_cast<int64_t>(payload_crc));
    if (c.kind == ImageKind::raw) {
      write_dataset(f, "images", H5T_NATIVE_UINT8,
                    {n, hsize_t(c.height), hsize_t(c.width), hsize_t(c.channels)}, c.images.data());
    } else {
      write_dataset(f, "images", H5T_NATIVE_UINT8, {c.images.size()}, c.images.data());
      write_dataset(f, "offsets", H5T_NATIVE_UINT64, {n}, c.offsets.data());
      write_dataset(f, "lengths", H5T_NATIVE_UINT32, {n}, c.lengths.data());
    }
    write_dataset(f, "labels", H5T_NATIVE_INT32, {n}, c.labels.data());
    write_dataset(f, "sample_crc32", H5T_NATIVE_UINT32, {n}, crcs.data());
    NOSTRUM_CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, IoError, "cannot flush shard", partial);
  }
  NOSTRUM_CHECK(std::rename(partial.c_str(), path.c_str()) == 0, IoError,
                "cannot rename shard into place: " + errno_text(), partial + " -> " + path);
}

namespace {

// Reads a whole 1-D dataset of `count` elements of mem_type into out.
template <typename T>
void read_index(hid_t file, const char* name, hid_t mem_type, int64_t count, std::vector<T>& out,
                const std::string& where) {
  NOSTRUM_CHECK(H5Lexists(file, name, H5P_DEFAULT) > 0, DataError,
                std::string("missing dataset '") + name + "'", where);
  H5Handle set(H5Dopen2(file, name, H5P_DEFAULT));
  H5Handle space(H5Dget_space(set.get()));
  NOSTRUM_CHECK(H5Sget_simple_extent_npoints(space.get()) == count, DataError,
                std::string("dataset '") + name +
                    "' does not hold count = " + std::to_string(count) + " values",
                where);
  out.resize(static_cast<size_t>(count));
  NOSTRUM_CHECK(H5Dread(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
                DataError, std::string("cannot read dataset '") + name + "'", where);
}

}  // namespace

ShardReader::ShardReader(const std::string& path, int64_t num_classes) : path_(path) {
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    H5Quiet quiet;
    struct stat st;
    NOSTRUM_CHECK(::stat(path.c_str(), &st) == 0, IoError, "shard missing: " + errno_text(), path,
                  "is the dataset directory complete?");
    NOSTRUM_CHECK(H5Fis_hdf5(path.c_str()) > 0, DataError, "not an HDF5 file (corrupt shard?)",
                  path);
    // Read-only and never rewritten while training: no HDF5 file locks (flock-based since HDF5
    // 1.10; they fail on parallel file systems without lock support, hence HDF5's own
    // HDF5_USE_FILE_LOCKING=FALSE switch and, from 1.10.7, H5Pset_file_locking).
    H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(access.get(), false, true);
#endif
    H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get()));
    NOSTRUM_CHECK(file.valid(), DataError, "cannot open shard (corrupt HDF5?)", path);
    const hid_t f = file.get();
    const std::string format = read_string_attribute(f, "format", path);
    NOSTRUM_CHECK(format == kShardFormat, DataError,
                  "format is '" + format + "', not nostrum-shard", path);
    const int64_t version = read_int_attribute(f, "format_version", path);
    NOSTRUM_CHECK(version == kShardFormatVersion, DataError,
                  "shard format version " + std::to_string(version) +
                      ", this build reads version " + std::to_string(kShardFormatVersion),
                  path);
    kind_ = parse_image_kind(read_string_attribute(f, "image_kind", path), path);
    const int64_t count = read_int_attribute(f, "count", path);
    NOSTRUM_CHECK(count > 0, DataError, "shard count must be positive", path);
    height_ = static_cast<int>(read_int_attribute(f, "height", path));
    width_ = static_cast<int>(read_int_attribute(f, "width", path));
    channels_ = static_cast<int>(read_int_attribute(f, "channels", path));
    payload_crc_ = static_cast<uint32_t>(read_int_attribute(f, "payload_crc32", path));
    read_index(f, "labels", H5T_NATIVE_INT32, count, labels_, path);
    read_index(f, "sample_crc32", H5T_NATIVE_UINT32, count, crcs_, path);

    NOSTRUM_CHECK(H5Lexists(f, "images", H5P_DEFAULT) > 0, DataError, "missing dataset 'images'",
                  path);
    H5Handle images(H5Dopen2(f, "images", H5P_DEFAULT));
    H5Handle type(H5Dget_type(images.get()));
    NOSTRUM_CHECK(H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_size(type.get()) == 1,
                  DataError, "dataset 'images' must be uint8", path);
    H5Handle plist(H5Dget_create_plist(images.get()));
    NOSTRUM_CHECK(H5Pget_layout(plist.get()) == H5D_CONTIGUOUS, DataError,
                  "dataset 'images' must be contiguous (unchunked, uncompressed)", path,
                  "write it without chunks or filters so samples can be read with pread");
    H5Handle space(H5Dget_space(images.get()));
    payload_size_ = static_cast<uint64_t>(H5Sget_simple_extent_npoints(space.get()));
    const haddr_t address = H5Dget_offset(images.get());
    NOSTRUM_CHECK(address != HADDR_UNDEF, DataError, "dataset 'images' has no storage", path);
    payload_offset_ = address;

    if (kind_ == ImageKind::jpeg) {
      read_index(f, "offsets", H5T_NATIVE_UINT64, count, offsets_, path);
      read_index(f, "lengths", H5T_NATIVE_UINT32, count, lengths_, path);
    } else {
      NOSTRUM_CHECK(height_ > 0 && width_ > 0 && (channels_ == 1 || channels_ == 3), DataError,
                    "raw shard needs height, width > 0 and channels 1 or 3", path);
      const uint64_t size = uint64_t(height_) * width_ * channels_;
      NOSTRUM_CHECK(payload_size_ == size * count, DataError,
                    "raw images dataset does not hold count x height x width x channels bytes",
                    path);
      offsets_.resize(static_cast<size_t>(count));
      lengths_.assign(static_cast<size_t>(count), static_cast<uint32_t>(size));
      for (int64_t i = 0; i < count; ++i) offsets_[static_cast<size_t>(i)] = uint64_t(i) * size;
    }
  }
  for (size_t i = 0; i < labels_.size(); ++i) {
    NOSTRUM_CHECK(labels_[i] >= 0 && labels_[i] < num_classes, DataError,
                  "label " + std::to_string(labels_[i]) + " out of range [0, " +
                      std::to_string(num_classes) + ")",
                  path + " sample " + std::to_string(i));
    NOSTRUM_CHECK(offsets_[i] + lengths_[i] <= payload_size_ && lengths_[i] > 0, DataError,
                  "sample bytes [" + std::to_string(offsets_[i]) + ", +" +
                      std::to_string(lengths_[i]) + ") lie outside the payload of " +
                      std::to_string(payload_size_) + " bytes",
                  path + " sample " + std::to_string(i));
    max_length_ = std::max<size_t>(max_length_, lengths_[i]);
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  NOSTRUM_CHECK(fd_ >= 0, IoError, "cannot open shard: " + errno_text(), path);
}

ShardReader::~ShardReader() {
  if (fd_ >= 0) ::close(fd_);
}

ShardReader::ShardReader(ShardReader&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(o.fd_),
      kind_(o.kind_),
      height_(o.height_),
      width_(o.width_),
      channels_(o.channels_),
      payload_offset_(o.payload_offset_),
      payload_size_(o.payload_size_),
      payload_crc_(o.payload_crc_),
      offsets_(std::move(o.offsets_)),
      lengths_(std::move(o.lengths_)),
      labels_(std::move(o.labels_)),
      crcs_(std::move(o.crcs_)),
      max_length_(o.max_length_) {
  o.fd_ = -1;
}

namespace {
void pread_all(int fd, uint8_t* out, size_t size, uint64_t offset, const std::string& where) {
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    NOSTRUM_CHECK(got > 0, DataError,
                  got == 0 ? "shard is truncated (short read)" : "read failed: " + errno_text(),
                  where);
    done += static_cast<size_t>(got);
  }
}
}  // namespace

void ShardReader::read(int64_t i, std::vector<uint8_t>& out, const std::string& where) const {
  const size_t k = static_cast<size_t>(i);
  const size_t size = lengths_[k];
  out.resize(size);  // keeps its capacity: no allocation once the largest sample has been read
  const auto name = [&]() {
    return where.empty() ? path_ + " sample " + std::to_string(i) : where;
  };
  pread_all(fd_, out.data(), size, payload_offset_ + offsets_[k], name());
  const uint32_t crc = crc32_of(out.data(), size);
  NOSTRUM_CHECK(crc == crcs_[k], DataError, "sample checksum mismatch (corrupt shard)", name());
}

void ShardReader::verify_payload() const {
  std::vector<uint8_t> buffer(size_t{8} << 20);
  uint32_t crc = 0;
  for (uint64_t done = 0; done < payload_size_;) {
    const size_t piece =
        static_cast<size_t>(std::min<uint64_t>(buffer.size(), payload_size_ - done));
    pread_all(fd_, buffer.data(), piece, payload_offset_ + done, path_);
    crc = crc32_of(buffer.data(), piece, crc);
    done += piece;
  }
  crc = crc32_of(reinterpret_cast<const uint8_t*>(labels_.data()), labels_.size() * sizeof(int32_t),
                 crc);
  NOSTRUM_CHECK(crc == payload_crc_, DataError, "payload checksum mismatch (corrupt shard)", path_);
}

}  // namespace nostrum::io
