// HDF5 weights files (see weights_file.hpp): RAII handles, strict checks, error stacks silenced and
// turned into typed errors that name the file and the key.
#include "io/weights_file.hpp"

#include <hdf5.h>

#include <set>
#include <vector>

#include "nostrum/core/error.hpp"

namespace nostrum::io {

namespace {

// Owns one HDF5 id and closes it with the matching function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// Silences HDF5's automatic error printing for the scope; our typed errors say what went wrong.
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

std::string shape_string(const std::vector<hsize_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

void write_int_attribute(hid_t loc, const char* name, int value, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  NOSTRUM_CHECK(attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_INT, &value) >= 0, IoError,
                std::string("cannot write attribute ") + name, path);
}

void write_string_attribute(hid_t loc, const char* name, const std::string& value,
                            const std::string& path) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.size() + 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  NOSTRUM_CHECK(attr.ok() && H5Awrite(attr.get(), type.get(), value.c_str()) >= 0, IoError,
                std::string("cannot write attribute ") + name, path);
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::set<std::string>*>(out)->insert(name);
  return 0;
}

}  // namespace

void save_weights(const std::string& path, const ParameterTable& table,
                  const std::string& model_name) {
  QuietHdf5 quiet;
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  NOSTRUM_CHECK(file.ok(), IoError, "cannot create weights file", path,
                "check that the directory exists and is writable");
  write_string_attribute(file.get(), "format", "nostrum-weights", path);
  write_int_attribute(file.get(), "format_version", kWeightsFormatVersion, path);
  write_string_attribute(file.get(), "model", model_name, path);
  Handle group(H5Gcreate2(file.get(), "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  NOSTRUM_CHECK(group.ok(), IoError, "cannot create group /model", path);
  for (const auto& p : table) {
    std::vector<hsize_t> dims;
    for (int i = 0; i < p.shape.rank(); ++i) dims.push_back(static_cast<hsize_t>(p.shape[i]));
    Handle space(dims.empty()
                     ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                 H5Sclose);
    Handle set(H5Dcreate2(group.get(), p.name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                          H5P_DEFAULT, H5P_DEFAULT),
               H5Dclose);
    NOSTRUM_CHECK(set.ok() && H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                       p.value) >= 0,
                  IoError, "cannot write dataset /model/" + p.name, path);
  }
  NOSTRUM_CHECK(H5Fflush(file.get(), H5F_SCOPE_LOCAL) >= 0, IoError, "cannot flush weights file",
                path);
}

void load_weights(const std::string& path, ParameterTable& table) {
  QuietHdf5 quiet;
  NOSTRUM_CHECK(H5Fis_hdf5(path.c_str()) > 0, IoError, "not an HDF5 file (or it does not exist)",
                path, "give a weights file written by nostrum or tools/weights/torch_to_h5.py");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  NOSTRUM_CHECK(file.ok(), IoError, "cannot open weights file", path);
  NOSTRUM_CHECK(H5Aexists(file.get(), "format_version") > 0 &&
                    H5Lexists(file.get(), "model", H5P_DEFAULT) > 0,
                IoError, "not a nostrum weights file (no format_version attribute or /model group)",
                path, "convert PyTorch weights with tools/weights/torch_to_h5.py");
  int version = 0;
  {
    Handle attr(H5Aopen(file.get(), "format_version", H5P_DEFAULT), H5Aclose);
    NOSTRUM_CHECK(attr.ok() && H5Aread(attr.get(), H5T_NATIVE_INT, &version) >= 0, IoError,
                  "cannot read format_version", path);
  }
  NOSTRUM_CHECK(version >= 1 && version <= kWeightsFormatVersion, IoError,
                "weights format version " + std::to_string(version) +
                    " is not supported (this build reads 1.." +
                    std::to_string(kWeightsFormatVersion) + ")",
                path);
  Handle group(H5Gopen2(file.get(), "model", H5P_DEFAULT), H5Gclose);
  std::set<std::string> in_file;
  H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_name, &in_file);
  for (const auto& p : table) {
    NOSTRUM_CHECK(in_file.count(p.name), DataError, "weights file lacks key '" + p.name + "'", path,
                  "the file holds " + std::to_string(in_file.size()) +
                      " tensors: was it saved from another model?");
    in_file.erase(p.name);
  }
  NOSTRUM_CHECK(in_file.empty(), DataError,
                "weights file has key '" + (in_file.empty() ? std::string() : *in_file.begin()) +
                    "' that the model lacks (" + std::to_string(in_file.size()) + " such keys)",
                path, "was it saved from another model?");
  for (auto& p : table) {
    const std::string where = path + ": /model/" + p.name;
    Handle set(H5Dopen2(group.get(), p.name.c_str(), H5P_DEFAULT), H5Dclose);
    NOSTRUM_CHECK(set.ok(), IoError, "cannot open dataset", where);
    Handle type(H5Dget_type(set.get()), H5Tclose);
    NOSTRUM_CHECK(H5Tget_class(type.get()) == H5T_FLOAT && H5Tget_size(type.get()) == 4, DataError,
                  "dataset is not float32", where, "convert with tools/weights/torch_to_h5.py");
    Handle space(H5Dget_space(set.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(rank > 0 ? rank : 0);
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    bool same = rank == p.shape.rank();
    for (int i = 0; same && i < rank; ++i) same = static_cast<int64_t>(dims[i]) == p.shape[i];
    NOSTRUM_CHECK(same, ShapeError,
                  "shape " + shape_string(dims) + " in the file, the model needs " + p.shape.str(),
                  where, "was it saved from another model or width?");
    NOSTRUM_CHECK(H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.value) >= 0,
                  IoError, "cannot read dataset", where);
  }
}

}  // namespace nostrum::io
