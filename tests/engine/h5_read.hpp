// Test helper: reads a whole HDF5 dataset as floats (or doubles) and runs the PyTorch reference
// script; shared by the weights-file and the PyTorch comparison tests. Temporary files go to a
// folder of this process's own, removed at exit: CTest runs one binary in two tests at once (the
// model tests, and the same under NOSTRUM_MAX_ISA=avx2), and a folder shared by name let one
// rewrite the PyTorch reference file that the other was reading.
#pragma once

#include <hdf5.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "temp_dir.hpp"

namespace nostrum::testing {

template <typename T>
std::vector<T> read_dataset(const std::string& path, const std::string& name) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(file >= 0);
  hid_t set = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  INFO("dataset " << name << " in " << path);
  REQUIRE(set >= 0);
  hid_t space = H5Dget_space(set);
  std::vector<T> out(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  const hid_t type = sizeof(T) == 4
                         ? (std::is_integral<T>::value ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT)
                         : H5T_NATIVE_DOUBLE;
  REQUIRE(H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0);
  H5Sclose(space);
  H5Dclose(set);
  H5Fclose(file);
  return out;
}

// Runs tests/engine/<script> (torch_reference.py by default) with /usr/bin/python3 (torch);
// REQUIREs exit code 0.
inline void run_torch_reference(const std::string& args,
                                const std::string& script = "torch_reference.py") {
  const std::string cmd = std::string(NOSTRUM_TORCH_PYTHON) + " " + NOSTRUM_SOURCE_DIR +
                          "/tests/engine/" + script + " " + args;
  INFO("running: " << cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

inline std::string temp_path(const std::string& name) {
  static const TempDir dir("engine-tests");
  return dir.str() + "/" + name;
}

}  // namespace nostrum::testing
