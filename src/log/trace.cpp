// TraceWriter: preallocated event buffer, atomic slot claim, Chrome-trace JSON (nlohmann::json).
#include "nostrum/log/trace.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "nostrum/core/error.hpp"

namespace nostrum::log {

namespace {

using Json = nlohmann::ordered_json;

// One JSON object per line; names may hold any bytes (invalid UTF-8 is replaced).
void put_line(std::FILE* f, const Json& j, bool first) {
  const std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::fputs(first ? "" : ",\n", f);
  std::fputs(text.c_str(), f);
}

const char* text(const char* s) {
  return s ? s : "";
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
  const Json other = {{"rank", rank_}, {"dropped_events", dropped()}};
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": %s,\n\"traceEvents\": [\n",
               other.dump().c_str());
  put_line(f,
           {{"name", "process_name"},
            {"ph", "M"},
            {"pid", rank_},
            {"tid", 0},
            {"args", {{"name", "rank " + std::to_string(rank_)}}}},
           true);
  for (const auto& [thread, name] : thread_names_)
    put_line(f,
             {{"name", "thread_name"},
              {"ph", "M"},
              {"pid", rank_},
              {"tid", thread},
              {"args", {{"name", text(name)}}}},
             false);
  const size_t n = size();
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events_[i];
    if (!e.ready.load(std::memory_order_acquire)) continue;  // claimed, still being filled
    Json event = {{"name", text(e.name)},
                  {"cat", text(e.category)},
                  {"ph", std::string(1, e.phase)},
                  {"ts", static_cast<double>(e.time_ns) / 1000.0},  // microseconds
                  {"pid", rank_},
                  {"tid", e.thread}};
    if (e.phase == 'i') event["s"] = "t";  // an instant on its thread's track
    put_line(f, event, false);
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
