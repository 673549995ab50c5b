// TraceWriter: preallocated event buffer, atomic slot claim, Chrome-trace JSON output.
#include "nostrum/log/trace.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "nostrum/core/error.hpp"

namespace nostrum::log {

namespace {
void put_json_string(std::FILE* f, const char* s) {
  std::fputc('"', f);
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : ""); *p; ++p) {
    if (*p == '"' || *p == '\\') {
      std::fputc('\\', f);
      std::fputc(*p, f);
    } else if (*p < 0x20) {
      std::fprintf(f, "\\u%04x", *p);
    } else {
      std::fputc(*p, f);
    }
  }
  std::fputc('"', f);
}
}  // namespace

TraceWriter::TraceWriter(int rank, size_t capacity)
    : rank_(rank), origin_(std::chrono::steady_clock::now()), events_(capacity) {}

void TraceWriter::append(const char* name, const char* category, char phase, int thread) {
  append_at(name, category, phase, thread,
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                 origin_)
                .count());
}

void TraceWriter::span(const char* name, const char* category, int thread, double start_s,
                       double end_s) {
  const double origin_s = std::chrono::duration<double>(origin_.time_since_epoch()).count();
  append_at(name, category, 'B', thread, static_cast<int64_t>((start_s - origin_s) * 1e9));
  append_at(name, category, 'E', thread, static_cast<int64_t>((end_s - origin_s) * 1e9));
}

void TraceWriter::instant_at(const char* name, const char* category, int thread, double time_s) {
  const double origin_s = std::chrono::duration<double>(origin_.time_since_epoch()).count();
  append_at(name, category, 'i', thread, static_cast<int64_t>((time_s - origin_s) * 1e9));
}

void TraceWriter::append_at(const char* name, const char* category, char phase, int thread,
                            int64_t t) {
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= events_.size()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Event& e = events_[i];
  e.name = name;
  e.category = category;
  e.time_ns = t;
  e.thread = thread;
  e.phase = phase;
  e.ready.store(true, std::memory_order_release);
}

void TraceWriter::name_thread(int thread, const char* name) {
  thread_names_.emplace_back(thread, name);
}

size_t TraceWriter::size() const {
  const size_t n = next_.load(std::memory_order_relaxed);
  return n < events_.size() ? n : events_.size();
}

void TraceWriter::write(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "w");
  NOSTRUM_CHECK(f != nullptr, IoError,
                std::string("cannot open the trace file for writing: ") + std::strerror(errno),
                path, "check that the directory exists and is writable (--trace)");
  std::fprintf(
      f,
      "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"dropped_events\": %zu},\n"
      "\"traceEvents\": [\n",
      rank_, dropped());
  std::fprintf(f,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
               "\"args\": {\"name\": \"rank %d\"}}",
               rank_, rank_);
  for (const auto& [thread, name] : thread_names_) {
    std::fprintf(f,
                 ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                 "\"args\": {\"name\": ",
                 rank_, thread);
    put_json_string(f, name);
    std::fputs("}}", f);
  }
  const size_t n = size();
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events_[i];
    if (!e.ready.load(std::memory_order_acquire)) continue;  // claimed, still being filled
    std::fputs(",\n{\"name\": ", f);
    put_json_string(f, e.name);
    std::fputs(", \"cat\": ", f);
    put_json_string(f, e.category);
    std::fprintf(f, ", \"ph\": \"%c\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d%s}", e.phase,
                 static_cast<double>(e.time_ns) / 1000.0, rank_, e.thread,
                 e.phase == 'i' ? ", \"s\": \"t\"" : "");
  }
  std::fputs("\n]}\n", f);
  const bool ok = std::ferror(f) == 0;
  const bool closed = std::fclose(f) == 0;
  NOSTRUM_CHECK(ok && closed, IoError, "writing the trace file failed", path, "disk full?");
}

std::string TraceWriter::path_for_rank(const std::string& path, int rank) {
  const std::string tag = ".rank" + std::to_string(rank);
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + tag + ".json";
  return path.substr(0, dot) + tag + path.substr(dot);
}

}  // namespace nostrum::log
