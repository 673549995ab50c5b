// MlLogger: MLPerf's `:::MLLOG {json}` lines (namespace, time_ms, event_type, key, value, metadata
// with file and lineno) to a file and/or stdout, written by rank 0 only (the caller says which rank
// it is; no MPI here). The JSON is made by nlohmann::json and printed with Python's json.dumps
// separators (", ", ": "), as MLPerf's own logger prints it. NaN and Infinity are never printed:
// they become null plus a "nonfinite" note.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nostrum/log/mllog_keys.hpp"

namespace nostrum::log {

// A log value: null, bool, integer, double or string.
class LogValue {
 public:
  LogValue() = default;  // null
  LogValue(std::nullptr_t) {}
  LogValue(bool b) : v_(b) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogValue(T i) : v_(static_cast<int64_t>(i)) {}
  LogValue(double d) : v_(d) {}
  // A float logs as its shortest decimal (0.9f -> 0.9, 0.0001f -> 0.0001), as the user wrote it.
  LogValue(float f) : v_(shortest_double(f)) {}
  LogValue(const char* s) : v_(std::string(s)) {}
  LogValue(std::string s) : v_(std::move(s)) {}

  // JSON text; a non-finite double prints as null and sets *nonfinite to "nan", "inf" or "-inf".
  std::string json(const char** nonfinite = nullptr) const;

  using Variant = std::variant<std::monostate, bool, int64_t, double, std::string>;
  const Variant& variant() const { return v_; }

 private:
  static double shortest_double(float f);
  Variant v_;
};

using Metadata = std::vector<std::pair<std::string, LogValue>>;

struct SourceLocation {
  const char* file = "";
  int line = 0;
};
// The caller's file and line, for the metadata MLPerf asks for: logger.event(NOSTRUM_HERE, ...).
#define NOSTRUM_HERE (::nostrum::log::SourceLocation{__FILE__, __LINE__})

class MlLogger {
 public:
  enum class EventType { kPointInTime, kIntervalStart, kIntervalEnd };

  MlLogger() = default;  // writes nothing
  // Writes only when is_rank0. `path` (truncated; empty: no file) and/or stdout. Throws IoError
  // naming the path when it cannot be opened.
  MlLogger(bool is_rank0, const std::string& path, bool to_stdout);
  // A resumed run's log: keeps the first keep_bytes of the existing file (what the checkpointed
  // run had written when it saved), drops the rest and appends, so the log stays one run's log.
  // IoError naming the path when the file is missing or shorter than keep_bytes.
  MlLogger(bool is_rank0, const std::string& path, bool to_stdout, int64_t keep_bytes);
  // Bytes written to the file so far (after a flush); 0 without a file.
  int64_t file_bytes();
  ~MlLogger();
  MlLogger(const MlLogger&) = delete;
  MlLogger& operator=(const MlLogger&) = delete;

  void event(SourceLocation where, const char* key, const LogValue& value = {},
             const Metadata& metadata = {});
  void start(SourceLocation where, const char* key, const LogValue& value = {},
             const Metadata& metadata = {});
  void end(SourceLocation where, const char* key, const LogValue& value = {},
           const Metadata& metadata = {});

  // One formatted line without the trailing newline (also what gets written); time_ms given.
  static std::string format(EventType type, int64_t time_ms, SourceLocation where, const char* key,
                            const LogValue& value, const Metadata& metadata);
  bool enabled() const { return file_ != nullptr || to_stdout_; }

 private:
  void write(EventType type, SourceLocation where, const char* key, const LogValue& value,
             const Metadata& metadata);
  std::FILE* file_ = nullptr;
  bool to_stdout_ = false;
  std::string path_;
  std::mutex mutex_;
};

}  // namespace nostrum::log
