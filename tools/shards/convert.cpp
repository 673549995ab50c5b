// The converters' shared machinery: output preparation, the threaded shard-job runner,
// verification.
#include "convert.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "io/split_reader.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::shards {

namespace fs = std::filesystem;

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

void prepare_output(const ConvertOptions& options, const std::vector<std::string>& splits) {
  NOSTRUM_CHECK(!options.output.empty(), OptionError, "no output directory given", "--output");
  const fs::path out(options.output);
  std::error_code ec;
  if (fs::exists(out, ec)) {
    NOSTRUM_CHECK(fs::is_directory(out, ec), IoError, "output exists and is not a directory",
                  out.string());
    const bool empty = fs::is_empty(out, ec);
    NOSTRUM_CHECK(empty || options.overwrite, IoError, "output directory is not empty",
                  out.string(), "pass --overwrite to replace the dataset in it");
    if (!empty) {
      fs::remove(out / io::kManifestName, ec);  // first: an interrupted overwrite is never complete
      for (const auto& entry : fs::directory_iterator(out, ec)) {
        if (entry.is_directory()) {
          for (const auto& file : fs::directory_iterator(entry.path(), ec)) {
            if (file.path().extension() == ".h5" || file.path().extension() == ".partial")
              fs::remove(file.path(), ec);
          }
        } else if (entry.path().extension() == ".partial") {
          fs::remove(entry.path(), ec);
        }
      }
    }
  }
  for (const std::string& split : splits) {
    fs::create_directories(out / split, ec);
    NOSTRUM_CHECK(!ec, IoError, "cannot create directory: " + ec.message(), (out / split).string());
  }
}

io::Manifest run_jobs(std::vector<ShardJob>& jobs, io::Manifest manifest, io::ImageKind kind,
                      const ConvertOptions& options) {
  struct Result {
    int64_t count = 0;
    std::string path;
    std::vector<io::SkippedInput> skipped;
  };
  std::vector<Result> results(jobs.size());
  std::vector<int64_t> index_in_split(jobs.size());
  {
    std::vector<std::pair<std::string, int64_t>> next;
    for (size_t k = 0; k < jobs.size(); ++k) {
      int64_t* n = nullptr;
      for (auto& p : next)
        if (p.first == jobs[k].split) n = &p.second;
      if (!n) n = &next.emplace_back(jobs[k].split, 0).second;
      index_in_split[k] = (*n)++;
    }
  }
  std::atomic<size_t> next_job{0};
  std::atomic<bool> failed{false};
  std::atomic<int64_t> done_samples{0};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const auto start = std::chrono::steady_clock::now();
  const auto worker = [&]() {
    for (;;) {
      const size_t k = next_job++;
      if (k >= jobs.size() || failed) return;
      try {
        io::ShardContents contents;
        contents.kind = kind;
        if (kind == io::ImageKind::raw) {
          contents.height = manifest.height;
          contents.width = manifest.width;
          contents.channels = manifest.channels;
        }
        jobs[k].fill(contents, results[k].skipped);
        results[k].count = contents.count();
        if (contents.count() > 0) {
          char name[64];
          std::snprintf(name, sizeof(name), "shard-%05lld.h5",
                        static_cast<long long>(index_in_split[k]));
          results[k].path = jobs[k].split + "/" + name;
          io::write_shard(options.output + "/" + results[k].path, contents);
        }
        const int64_t total = done_samples += contents.count();
        if (!options.quiet) {
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          std::printf("nostrum-shards: shard %zu/%zu %s (%lld images, %.0f images/s)\n", k + 1,
                      jobs.size(), results[k].path.c_str(),
                      static_cast<long long>(contents.count()), total / std::max(s, 1e-9));
          std::fflush(stdout);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  const int threads = std::min<int>(resolve_threads(options.threads),
                                    std::max<int>(1, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);

  for (size_t k = 0; k < jobs.size(); ++k) {
    io::SplitInfo* split = nullptr;
    for (io::SplitInfo& s : manifest.splits)
      if (s.name == jobs[k].split) split = &s;
    if (!split) split = &manifest.splits.emplace_back(io::SplitInfo{jobs[k].split, 0, {}, {}});
    if (results[k].count > 0) split->shards.push_back({results[k].path, results[k].count});
    split->count += results[k].count;
    for (auto& skip : results[k].skipped) split->skipped.push_back(std::move(skip));
  }
  manifest.kind = kind;
  manifest.write(options.output);
  return manifest;
}

int64_t verify_dataset(const std::string& dir, int threads) {
  const io::Manifest manifest = io::Manifest::read(dir);
  int64_t samples = 0;
  for (const io::SplitInfo& split : manifest.splits) {
    if (split.count == 0) continue;
    io::SplitReader reader(dir, manifest, split.name);
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex mutex;
    std::vector<std::thread> pool;
    for (int t = 0; t < resolve_threads(threads); ++t) {
      pool.emplace_back([&]() {
        for (size_t k = next++; k < reader.shards().size(); k = next++) {
          try {
            reader.shards()[k].verify_payload();
          } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!error) error = std::current_exception();
          }
        }
      });
    }
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    samples += reader.count();
  }
  return samples;
}

}  // namespace nostrum::shards
