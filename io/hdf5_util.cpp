// HDF5 helpers: process-wide lock, owning handle, in-memory files, attribute and dataset
// read/write.
#include "io/hdf5_util.hpp"

#include "nostrum/core/error.hpp"

namespace nostrum::io {

std::mutex& hdf5_mutex() {
  static std::mutex mutex;
  return mutex;
}

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
  if (this != &other) {
    H5Handle tmp(std::move(*this));
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

H5Handle::~H5Handle() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
}

H5Handle create_memory_file(const std::string& name, size_t increment) {
  H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
  NOSTRUM_CHECK(access.valid() && H5Pset_fapl_core(access.get(), increment, 0) >= 0 &&
                    H5Pset_fclose_degree(access.get(), H5F_CLOSE_STRONG) >= 0,
                IoError, "cannot set up an HDF5 file in memory", name);
  H5Handle file(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
  NOSTRUM_CHECK(file.valid(), IoError, "cannot create an HDF5 file in memory", name);
  return file;
}

std::vector<unsigned char> file_image(hid_t file, const std::string& where) {
  NOSTRUM_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, IoError, "cannot flush the HDF5 file",
                where);
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  NOSTRUM_CHECK(size > 0, IoError, "cannot get the HDF5 file's image", where);
  std::vector<unsigned char> image(static_cast<size_t>(size));
  NOSTRUM_CHECK(H5Fget_file_image(file, image.data(), image.size()) == size, IoError,
                "cannot copy the HDF5 file's image", where);
  return image;
}

H5Quiet::H5Quiet() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}
H5Quiet::~H5Quiet() {
  H5Eset_auto2(H5E_DEFAULT, func_, data_);
}

void write_attribute(hid_t object, const char* name, const std::string& value) {
  H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), value.size() ? value.size() : 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(attr.valid() && H5Awrite(attr.get(), type.get(), value.c_str()) >= 0, IoError,
                std::string("cannot write HDF5 attribute ") + name);
}

void write_attribute(hid_t object, const char* name, int64_t value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(attr.valid() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) >= 0, IoError,
                std::string("cannot write HDF5 attribute ") + name);
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& where) {
  NOSTRUM_CHECK(H5Aexists(object, name) > 0, DataError,
                std::string("missing attribute '") + name + "'", where, "is this a nostrum shard?");
  H5Handle attr(H5Aopen(object, name, H5P_DEFAULT));
  H5Handle type(H5Aget_type(attr.get()));
  NOSTRUM_CHECK(H5Tget_class(type.get()) == H5T_STRING, DataError,
                std::string("attribute '") + name + "' is not a string", where);
  if (H5Tis_variable_str(type.get()) > 0) {  // h5py's default for str attributes
    H5Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    char* text = nullptr;
    NOSTRUM_CHECK(H5Aread(attr.get(), mem.get(), &text) >= 0, DataError,
                  std::string("cannot read attribute '") + name + "'", where);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  H5Handle mem(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem.get(), size);
  H5Tset_strpad(mem.get(), H5T_STR_NULLPAD);  // keep every stored byte; we trim at the first NUL
  NOSTRUM_CHECK(H5Aread(attr.get(), mem.get(), value.data()) >= 0, DataError,
                std::string("cannot read attribute '") + name + "'", where);
  value.resize(value.find_first_of('\0') == std::string::npos ? size : value.find_first_of('\0'));
  return value;
}

int64_t read_int_attribute(hid_t object, const char* name, const std::string& where) {
  NOSTRUM_CHECK(H5Aexists(object, name) > 0, DataError,
                std::string("missing attribute '") + name + "'", where, "is this a nostrum shard?");
  H5Handle attr(H5Aopen(object, name, H5P_DEFAULT));
  int64_t value = 0;
  NOSTRUM_CHECK(H5Aread(attr.get(), H5T_NATIVE_INT64, &value) >= 0, DataError,
                std::string("attribute '") + name + "' is not an integer", where);
  return value;
}

void write_dataset(hid_t file, const char* name, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data) {
  H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  hid_t file_type = mem_type;
  if (H5Tequal(mem_type, H5T_NATIVE_UINT8) > 0) file_type = H5T_STD_U8LE;
  if (H5Tequal(mem_type, H5T_NATIVE_INT32) > 0) file_type = H5T_STD_I32LE;
  if (H5Tequal(mem_type, H5T_NATIVE_UINT32) > 0) file_type = H5T_STD_U32LE;
  if (H5Tequal(mem_type, H5T_NATIVE_UINT64) > 0) file_type = H5T_STD_U64LE;
  H5Handle set(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(set.valid(), IoError, std::string("cannot create HDF5 dataset ") + name);
  NOSTRUM_CHECK(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, IoError,
                std::string("cannot write HDF5 dataset ") + name);
}

}  // namespace nostrum::io
