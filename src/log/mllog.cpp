// MlLogger: JSON formatting of MLPerf log lines (escaped strings, round-trip doubles, no NaN).
#include "nostrum/log/mllog.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "nostrum/core/error.hpp"

namespace nostrum::log {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// Shortest of %.15g / %.17g that reads back to the same double; always with '.' or 'e', so JSON
// readers see a float (0.0001, 2.0, 1e-05).
std::string json_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", d);
  if (std::strtod(buf, nullptr) != d) std::snprintf(buf, sizeof buf, "%.17g", d);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
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
  if (nonfinite) *nonfinite = nullptr;
  if (std::holds_alternative<bool>(v_)) return std::get<bool>(v_) ? "true" : "false";
  if (std::holds_alternative<int64_t>(v_)) return std::to_string(std::get<int64_t>(v_));
  if (std::holds_alternative<std::string>(v_)) return json_string(std::get<std::string>(v_));
  if (std::holds_alternative<double>(v_)) {
    const double d = std::get<double>(v_);
    if (std::isfinite(d)) return json_double(d);
    if (nonfinite) *nonfinite = std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
    return "null";
  }
  return "null";
}

MlLogger::MlLogger(bool is_rank0, const std::string& path, bool to_stdout)
    : to_stdout_(is_rank0 && to_stdout), path_(path) {
  if (!is_rank0 || path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  NOSTRUM_CHECK(file_ != nullptr, IoError,
                std::string("cannot open the MLPerf log for writing: ") + std::strerror(errno),
                path, "check that the directory exists and is writable (--mllog)");
}

MlLogger::~MlLogger() {
  if (file_) std::fclose(file_);
}

std::string MlLogger::format(EventType type, int64_t time_ms, SourceLocation where, const char* key,
                             const LogValue& value, const Metadata& metadata) {
  const char* value_nonfinite = nullptr;
  const std::string value_json = value.json(&value_nonfinite);
  std::string line = ":::MLLOG {\"namespace\": \"\", \"time_ms\": " + std::to_string(time_ms) +
                     ", \"event_type\": \"" + event_type_name(type) +
                     "\", \"key\": " + json_string(key) + ", \"value\": " + value_json +
                     ", \"metadata\": {\"file\": " + json_string(where.file ? where.file : "") +
                     ", \"lineno\": " + std::to_string(where.line);
  for (const auto& [name, v] : metadata) {
    const char* nonfinite = nullptr;
    const std::string text = v.json(&nonfinite);
    line += ", " + json_string(name) + ": " + text;
    if (nonfinite) line += ", " + json_string(name + "_nonfinite") + ": \"" + nonfinite + "\"";
  }
  if (value_nonfinite) line += std::string(", \"value_nonfinite\": \"") + value_nonfinite + "\"";
  return line + "}}";
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
