// nostrum-shards bench: runs the Loader on a dataset and prints one line per thread count.
#include "bench.hpp"

#include <chrono>
#include <cstdio>

#include "io/loader.hpp"

namespace nostrum::shards {

void run_bench(const BenchOptions& options) {
  const io::Manifest manifest = io::Manifest::read(options.data);
  std::printf("# dataset %s split %s kind %s batch %lld %s step %.1f ms\n", options.data.c_str(),
              options.split.c_str(), io::to_string(manifest.kind),
              static_cast<long long>(options.batch), options.eval ? "eval" : "train",
              options.step_ms);
  std::printf("%8s %10s %12s %18s %14s\n", "threads", "size", "images/s", "images/s/thread",
              "data wait %");
  for (int threads : options.threads) {
    io::LoaderConfig config;
    config.split = options.split;
    config.local_batch = options.batch;
    config.threads = threads;
    config.train = !options.eval;
    config.tail = options.eval ? data::TailPolicy::exact : data::TailPolicy::pad;
    if (manifest.kind == io::ImageKind::raw) {
      config.augment.out_height = manifest.height;
      config.augment.out_width = manifest.width;
      config.augment.out_channels = manifest.channels;
    } else {
      config.augment.out_height = config.augment.out_width = options.size;
      config.augment.eval_resize = options.size * 8 / 7;
    }
    io::Loader loader(options.data, manifest, config);
    int64_t epoch = 0;
    loader.start_epoch(epoch);
    io::Batch batch;
    const auto take = [&]() {
      if (!loader.next(batch)) {
        loader.start_epoch(++epoch);
        loader.next(batch);
      }
    };
    take();
    take();  // warm-up: threads started, page cache touched
    loader.reset_stats();
    const auto start = std::chrono::steady_clock::now();
    int64_t images = 0;
    for (int64_t b = 0; b < options.batches; ++b) {
      take();
      images += batch.count;
      if (options.step_ms > 0) {  // a busy "training step" on this thread
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration<double, std::milli>(options.step_ms);
        volatile double sink = 0;
        while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const io::LoaderStats stats = loader.stats();
    std::printf("%8d %10s %12.1f %18.1f %14.2f\n", threads,
                (std::to_string(loader.height()) + "x" + std::to_string(loader.width())).c_str(),
                images / seconds, images / seconds / threads, 100.0 * stats.wait_seconds / seconds);
    std::fflush(stdout);
  }
}

}  // namespace nostrum::shards
