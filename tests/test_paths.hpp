// Paths tests need: the source tree (scripts, reference implementations) and the Python
// interpreter with torch (Debian's /usr/bin/python3), both set by tests/CMakeLists.txt.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#ifndef NOSTRUM_SOURCE_DIR
#error "NOSTRUM_SOURCE_DIR must be defined by tests/CMakeLists.txt"
#endif

namespace nostrum::testing {

inline std::string torch_python() {
  return NOSTRUM_TORCH_PYTHON;
}
inline std::string source_dir() {
  return NOSTRUM_SOURCE_DIR;
}

// A fresh empty directory under the system temp dir, unique per process and tag.
inline std::filesystem::path scratch_dir(const std::string& tag) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 ("nostrum-" + tag + "-" + std::to_string(static_cast<long>(::getpid())));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace nostrum::testing
