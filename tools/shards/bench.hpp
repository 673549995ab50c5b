// nostrum-shards bench: the input pipeline's throughput (images/s, per loader thread) and the
// fraction of a simulated training step spent waiting for data.
#pragma once

#include <string>
#include <vector>

namespace nostrum::shards {

struct BenchOptions {
  std::string data;  // dataset directory
  std::string split = "train";
  int64_t batch = 64;  // local batch
  std::vector<int> threads{1, 2};
  int size = 224;        // output H = W (JPEG); raw datasets use their own size
  bool eval = false;     // evaluation transform instead of training augmentation
  int64_t batches = 50;  // batches timed per configuration (after 2 warm-up batches)
  double step_ms = 0;    // > 0: spin this long per batch on the main thread (a training step)
};

void run_bench(const BenchOptions& options);

}  // namespace nostrum::shards
