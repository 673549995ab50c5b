// MlLogger: MLPerf log lines built with nlohmann::json (escaped strings, round-trip doubles, no
// NaN).
#include "nostrum/log/mllog.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "nostrum/core/error.hpp"

namespace nostrum::log {

namespace {

using Json = nlohmann::ordered_json;

// Python json.dumps' layout (", " and ": " separators, insertion order); scalars as nlohmann
// prints them: strings escaped, integers as integers, doubles in the shortest form that reads back
// exactly and always with '.' or an exponent (2.0, 0.0001, 1e-05). Invalid UTF-8 is replaced.
void dump(const Json& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += Json(key).dump(-1, ' ', false, Json::error_handler_t::replace);
      out += ": ";
      dump(value, out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ", ";
      dump(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

// The value as JSON; a non-finite double becomes null and sets *nonfinite to "nan", "inf", "-inf".
Json to_json(const LogValue& value, const char** nonfinite) {
  if (nonfinite) *nonfinite = nullptr;
  const LogValue::Variant& v = value.variant();
  if (std::holds_alternative<bool>(v)) return std::get<bool>(v);
  if (std::holds_alternative<int64_t>(v)) return std::get<int64_t>(v);
  if (std::holds_alternative<std::string>(v)) return std::get<std::string>(v);
  if (std::holds_alternative<double>(v)) {
    const double d = std::get<double>(v);
    if (std::isfinite(d)) return d;
    if (nonfinite) *nonfinite = std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
  }
  return nullptr;
}

const char* event_type_name(MlLogger::EventType t) {
  switch (t) {
    case MlLogger::EventType::kPointInTime:
      return "POINT_IN_TIME";
    case MlLogger::EventType::kIntervalStart:
      return "INTERVAL_START";
    case MlLogger::EventType::kIntervalEnd:
      return "INTERVAL_END";
  }
  return "POINT_IN_TIME";
}

}  // namespace

double LogValue::shortest_double(float f) {
  if (!std::isfinite(f)) return static_cast<double>(f);
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

std::string LogValue::json(const char** nonfinite) const {
  std::string out;
  dump(to_json(*this, nonfinite), out);
  return out;
}

MlLogger::MlLogger(bool is_rank0, const std::string& path, bool to_stdout)
    : to_stdout_(is_rank0 && to_stdout), path_(path) {
  if (!is_rank0 || path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  NOSTRUM_CHECK(file_ != nullptr, IoError,
                std::string("cannot open the MLPerf log for writing: ") + std::strerror(errno),
                path, "check that the directory exists and is writable (--mllog)");
}

MlLogger::MlLogger(bool is_rank0, const std::string& path, bool to_stdout, int64_t keep_bytes)
    : to_stdout_(is_rank0 && to_stdout), path_(path) {
  if (!is_rank0 || path.empty()) return;
  file_ = std::fopen(path.c_str(), "r+");
  NOSTRUM_CHECK(
      file_ != nullptr, IoError,
      std::string("cannot reopen the MLPerf log of the checkpointed run: ") + std::strerror(errno),
      path, "a resumed run appends to the log it started (--mllog)");
  std::fseek(file_, 0, SEEK_END);
  const long size = std::ftell(file_);
  if (size < keep_bytes) {
    std::fclose(file_);
    file_ = nullptr;
    throw IoError("the MLPerf log is shorter (" + std::to_string(size) +
                      " bytes) than when the checkpoint was written (" +
                      std::to_string(keep_bytes) + ")",
                  path, "was it replaced? a resumed run appends to the log it started");
  }
  NOSTRUM_CHECK(::ftruncate(::fileno(file_), static_cast<off_t>(keep_bytes)) == 0, IoError,
                std::string("cannot truncate the MLPerf log: ") + std::strerror(errno), path);
  std::fseek(file_, 0, SEEK_END);
}

int64_t MlLogger::file_bytes() {
  if (!file_) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  std::fflush(file_);
  return static_cast<int64_t>(std::ftell(file_));
}

MlLogger::~MlLogger() {
  if (file_) std::fclose(file_);
}

std::string MlLogger::format(EventType type, int64_t time_ms, SourceLocation where, const char* key,
                             const LogValue& value, const Metadata& metadata) {
  const char* value_nonfinite = nullptr;
  Json line;
  line["namespace"] = "";
  line["time_ms"] = time_ms;
  line["event_type"] = event_type_name(type);
  line["key"] = key;
  line["value"] = to_json(value, &value_nonfinite);
  Json& meta = line["metadata"];
  meta["file"] = where.file ? where.file : "";
  meta["lineno"] = where.line;
  for (const auto& [name, v] : metadata) {
    const char* nonfinite = nullptr;
    meta[name] = to_json(v, &nonfinite);
    if (nonfinite) meta[name + "_nonfinite"] = nonfinite;
  }
  if (value_nonfinite) meta["value_nonfinite"] = value_nonfinite;
  std::string out = ":::MLLOG ";
  dump(line, out);
  return out;
}

void MlLogger::write(EventType type, SourceLocation where, const char* key, const LogValue& value,
                     const Metadata& metadata) {
  if (!enabled()) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string line = format(type, now, where, key, value, metadata) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_) {
    std::fputs(line.c_str(), file_);
    std::fflush(file_);  // a crashed run keeps its log
  }
  if (to_stdout_) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
}

void MlLogger::event(SourceLocation where, const char* key, const LogValue& value,
                     const Metadata& metadata) {
  write(EventType::kPointInTime, where, key, value, metadata);
}
void MlLogger::start(SourceLocation where, const char* key, const LogValue& value,
                     const Metadata& metadata) {
  write(EventType::kIntervalStart, where, key, value, metadata);
}
void MlLogger::end(SourceLocation where, const char* key, const LogValue& value,
                   const Metadata& metadata) {
  write(EventType::kIntervalEnd, where, key, value, metadata);
}

}  // namespace nostrum::log
