// The conv kernel cache file (conv_cache.hpp): JSON with a header (format, version, CPU), the
// entries, and a Hash64 checksum over the rest of the text.
#include "nostrum/kernels/conv_cache.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"

#ifndef NOSTRUM_VERSION_STRING
#error "NOSTRUM_VERSION_STRING is set by src/CMakeLists.txt"
#endif

namespace nostrum::kernels {

using Json = nlohmann::ordered_json;

namespace {

// 2: bf16 tables measure the fp32 candidates too, on the interleaved schedule (a format-1 file's
// choices were made without them: measured again). 3: each row names the operands the model hands
// over in bf16 (bf16_in, bf16_d_out) and keeps in bf16 (bf16_out), which the measurement gives the
// kernels that take them. 4: each backward-data row says whether it was measured adding onto
// d_in (accumulate_d_in), as a residual path's first conv runs.
constexpr const char* kFormat = "nostrum conv kernel cache 4";
constexpr const char* kFormatStem = "nostrum conv kernel cache ";

std::string hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The file is the JSON text, then one last line "checksum <16 hex digits>" of every byte before
// it: any changed byte, whitespace included, is seen.
constexpr const char* kChecksumPrefix = "checksum ";

std::string checksum_of(const std::string& body) {
  return hex64(hash_bytes(body.data(), body.size()));
}

}  // namespace

const char* nostrum_version() {
  return NOSTRUM_VERSION_STRING;
}

std::string conv_cache_cpu() {
  return cpu_features().describe();
}

std::string default_conv_cache_path() {
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::filesystem::path(home) / ".cache";
  else
    return "";
  const std::string cpu = conv_cache_cpu();
  const std::string name = "conv-kernels-" + hex64(hash_bytes(cpu.data(), cpu.size())) + ".json";
  return (dir / "nostrum" / name).string();
}

ConvCacheContents read_conv_cache(const std::string& path, const std::string& cpu,
                                  const std::string& version) {
  ConvCacheContents cache;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return cache;
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    cache.refused = "conv kernel cache " + path + " cannot be read";
    return cache;
  }
  const auto refuse = [&](const std::string& why) {
    cache = ConvCacheContents{};
    cache.refused = "conv kernel cache " + path + " refused: " + why;
    return cache;
  };
  const std::string all = text.str();
  const size_t last = all.rfind(kChecksumPrefix);
  if (last == std::string::npos || (last > 0 && all[last - 1] != '\n'))
    return refuse("damaged or not a nostrum conv kernel cache (no checksum line)");
  const std::string body = all.substr(0, last);
  std::string stored = all.substr(last + std::char_traits<char>::length(kChecksumPrefix));
  if (!stored.empty() && stored.back() == '\n') stored.pop_back();
  if (stored != checksum_of(body)) return refuse("damaged (checksum mismatch)");
  Json j;
  try {
    j = Json::parse(body);
  } catch (const nlohmann::json::exception&) {
    return refuse("damaged (not JSON)");
  }
  try {
    const std::string format = j.is_object() ? j.value("format", "") : "";
    if (format.rfind(kFormatStem, 0) == 0 && format != kFormat)
      return refuse("in an older cache format ('" + format + "', this is '" + kFormat + "')");
    if (format != kFormat) return refuse("not a nostrum conv kernel cache");
    if (j.at("nostrum_version").get<std::string>() != version)
      return refuse("written by nostrum " + j.at("nostrum_version").get<std::string>() +
                    ", this is " + version);
    if (j.at("cpu").get<std::string>() != cpu)
      return refuse("measured on another CPU (" + j.at("cpu").get<std::string>() + "), this is " +
                    cpu);
    for (const Json& e : j.at("entries")) {
      const ConvChoiceTable one = conv_choices_from_json(e.at("table").dump(), path);
      for (const ConvChoice& row : one.rows) {
        cache.rows.push_back(row);
        cache.threads.push_back(one.threads);
        cache.precisions.push_back(one.precision);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return refuse(std::string("damaged (") + e.what() + ")");
  } catch (const Error& e) {
    return refuse(std::string("damaged (") + e.what() + ")");
  }
  return cache;
}

const ConvChoice* find_cached(const ConvCacheContents& cache, const ConvPassShape& shape,
                              int threads, Precision precision) {
  for (size_t i = 0; i < cache.rows.size(); ++i)
    if (cache.threads[i] == threads && cache.precisions[i] == precision &&
        same_measured_shape(cache.rows[i].shape, shape))
      return &cache.rows[i];
  return nullptr;
}

void write_conv_cache(const std::string& path, ConvCacheContents cache,
                      const ConvChoiceTable& table, bool replace, const std::string& cpu,
                      const std::string& version) {
  for (const ConvChoice& row : table.rows) {
    if (row.source != ConvChoiceSource::kMeasured) continue;
    ConvChoice kept = row;
    kept.source = ConvChoiceSource::kCached;  // what a reader of the file gets
    bool replaced = false;
    for (size_t i = 0; i < cache.rows.size() && !replaced; ++i)
      if (cache.threads[i] == table.threads && cache.precisions[i] == table.precision &&
          same_measured_shape(cache.rows[i].shape, row.shape)) {
        if (replace) cache.rows[i] = kept;
        replaced = true;
      }
    if (!replaced) {
      cache.rows.push_back(kept);
      cache.threads.push_back(table.threads);
      cache.precisions.push_back(table.precision);
    }
  }
  // One table per (threads, precision), in the order first seen.
  Json entries = Json::array();
  std::vector<bool> done(cache.rows.size(), false);
  for (size_t i = 0; i < cache.rows.size(); ++i) {
    if (done[i]) continue;
    ConvChoiceTable t;
    t.threads = cache.threads[i];
    t.precision = cache.precisions[i];
    for (size_t k = i; k < cache.rows.size(); ++k)
      if (!done[k] && cache.threads[k] == t.threads && cache.precisions[k] == t.precision) {
        t.rows.push_back(cache.rows[k]);
        done[k] = true;
      }
    entries.push_back(Json{{"table", Json::parse(conv_choices_to_json(t))}});
  }
  Json j{{"format", kFormat}, {"nostrum_version", version}, {"cpu", cpu}, {"entries", entries}};
  const std::string body = j.dump(1) + "\n";

  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << body << kChecksumPrefix << checksum_of(body) << "\n";
    out.close();
    if (!out) {
      std::filesystem::remove(temp, ec);
      throw IoError("cannot write the conv kernel cache", temp,
                    "set --conv-cache to a writable file");
    }
  }
  std::filesystem::rename(temp, target, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    throw IoError("cannot write the conv kernel cache: " + ec.message(), path,
                  "set --conv-cache to a writable file");
  }
}

}  // namespace nostrum::kernels
