// pool_round_trip_ns: a cache line handed between the OpenMP pool's threads 0 and 1.
#include "nostrum/core/pool_round_trip.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>

namespace nostrum {

double pool_round_trip_ns(int trips, double max_seconds) {
  if (trips <= 0 || omp_get_max_threads() < 2 || omp_in_parallel()) return 0.0;
  // The line handed over: thread 0 writes 2i+1, thread 1 answers 2i+2; `stop` ends thread 1's
  // wait when thread 0 runs out of time.
  struct alignas(64) Line {
    std::atomic<int> ball{0};
    std::atomic<bool> stop{false};
  } line;
  double elapsed = 0.0;
  int done = 0;
  bool pair = false;
#pragma omp parallel num_threads(2)
  {
    const int me = omp_get_thread_num();
    if (me == 0) pair = omp_get_num_threads() == 2;
#pragma omp barrier
    if (pair && me == 0) {
      const double t0 = omp_get_wtime();
      for (int i = 0; i < trips; ++i) {
        line.ball.store(2 * i + 1, std::memory_order_release);
        bool late = false;
        while (line.ball.load(std::memory_order_acquire) != 2 * i + 2)
          if (omp_get_wtime() - t0 > max_seconds) {
            late = true;
            break;
          }
        if (late) break;
        done = i + 1;
      }
      elapsed = omp_get_wtime() - t0;
      line.stop.store(true, std::memory_order_release);
    } else if (pair && me == 1) {
      for (int i = 0; !line.stop.load(std::memory_order_acquire); ++i) {
        while (line.ball.load(std::memory_order_acquire) != 2 * i + 1)
          if (line.stop.load(std::memory_order_acquire)) break;
        if (line.ball.load(std::memory_order_acquire) != 2 * i + 1) break;
        line.ball.store(2 * i + 2, std::memory_order_release);
      }
    }
  }
  if (!pair) return 0.0;
  // No trip finished within the time: at least the whole time for one.
  return elapsed * 1e9 / std::max(done, 1);
}

bool same_host_state(double a_ns, double b_ns, double ratio) {
  if (a_ns <= 0.0 || b_ns <= 0.0) return true;
  return std::max(a_ns, b_ns) <= ratio * std::min(a_ns, b_ns);
}

}  // namespace nostrum
