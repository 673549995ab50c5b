// The trainer tests' data: a small synthetic dataset written by nostrum-shards' converter (square
// images with 3 channels), and a directory of this process's removed at exit.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "convert.hpp"

namespace nostrum::testing {

// <tmp>/nostrum-train-test-<pid>, removed when the process exits.
inline const std::string& process_temp_dir() {
  static const std::string dir = (std::filesystem::temp_directory_path() /
                                  ("nostrum-train-test-" + std::to_string(::getpid())))
                                     .string();
  // Registered after dir is built, so it runs before dir is destroyed.
  static const bool removed_at_exit = [] {
    return std::atexit([] {
             std::error_code ec;
             std::filesystem::remove_all(dir, ec);
           }) == 0;
  }();
  (void)removed_at_exit;
  return dir;
}

// Writes a dataset of `train` and `val` images of size x size x 3 to dir; returns dir.
inline std::string write_synthetic_dataset(const std::string& dir, io::ImageKind kind,
                                           int64_t train, int64_t val, int size) {
  shards::SyntheticOptions s;
  s.train = train;
  s.val = val;
  s.height = s.width = size;
  s.channels = 3;
  s.kind = kind;
  shards::ConvertOptions c;
  c.output = dir;
  c.threads = 1;
  c.overwrite = true;
  c.quiet = true;
  shards::convert_synthetic(s, c);
  return dir;
}

}  // namespace nostrum::testing
