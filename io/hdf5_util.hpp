// HDF5 helpers for the shard format: the process-wide HDF5 lock, an owning handle, files built in
// memory, and typed attribute/dataset read and write. Only io/*.cpp include this (no <hdf5.h> in
// public headers).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace nostrum::io {

// Debian's HDF5 is the non-thread-safe build: every HDF5 call in the process must hold this lock.
// It is process-wide state by nature (the library's own globals), hence one function-local static.
std::mutex& hdf5_mutex();

// Owns one hid_t and closes it with the matching H5?close.
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  H5Handle(H5Handle&& other) noexcept : id_(other.id_) { other.id_ = -1; }
  H5Handle& operator=(H5Handle&& other) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle();
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
};

// A new HDF5 file that lives in memory only (the core driver without a backing store, growing by
// `increment` bytes; closing it closes whatever it still holds open): HDF5 never writes to a disk
// for it, so neither writing nor closing it can fail on a full or failing disk. `name` only names
// it (no file of that name is created). file_image returns its bytes, flushed, for the caller to
// write with ordinary file calls.
H5Handle create_memory_file(const std::string& name, size_t increment);
std::vector<unsigned char> file_image(hid_t file, const std::string& where);

// Silences HDF5's automatic error stack printing while alive (we throw typed errors instead).
class H5Quiet {
 public:
  H5Quiet();
  ~H5Quiet();

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Attributes on an object; the read functions throw DataError naming `where` when missing or wrong.
void write_attribute(hid_t object, const char* name, const std::string& value);
void write_attribute(hid_t object, const char* name, int64_t value);
std::string read_string_attribute(hid_t object, const char* name, const std::string& where);
int64_t read_int_attribute(hid_t object, const char* name, const std::string& where);

// Creates a contiguous (unchunked, unfiltered) dataset of `dims` and writes data into it.
void write_dataset(hid_t file, const char* name, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data);

}  // namespace nostrum::io
