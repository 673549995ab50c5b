// TempDir: a fresh directory under the system temp folder, removed with everything in it at scope
// end.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

namespace nostrum::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("nostrum-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path_.string(); }
  std::filesystem::path path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace nostrum::testing
