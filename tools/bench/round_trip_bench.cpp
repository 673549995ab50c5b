// nostrum-round-trip-bench: how far apart the host holds two of this machine's CPUs, as the time
// of a cache line handed back and forth between a thread pinned to each (ns per round trip, one
// line per sample). On a virtual machine the answer moves: on the AMD EPYC Zen 5 under KVM
// (2026-12-07) CPUs 0 and 1 read 80-140 ns for seconds, then 410-540 (cores far apart), and the
// GEMMs that split one product between two threads ran 30-45 % slower in the far state until each
// thread kept to its own columns (src/kernels/bf16_gemm.md, "Threads own columns").
//
// Usage: nostrum-round-trip-bench [--cpus A B] [--samples N] [--gap-ms M]
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "nostrum-round-trip-bench: %s\nusage: nostrum-round-trip-bench [--cpus A B] "
               "[--samples N] [--gap-ms M]\n",
               why);
  return 2;
}

bool parse_int(const char* text, int* value) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1 << 20) return false;
  *value = int(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int a = 0, b = 1, samples = 10, gap_ms = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cpus" && i + 2 < argc) {
      if (!parse_int(argv[i + 1], &a) || !parse_int(argv[i + 2], &b))
        return usage("--cpus takes two CPU numbers");
      i += 2;
    } else if (arg == "--samples" && i + 1 < argc) {
      if (!parse_int(argv[++i], &samples) || samples < 1) return usage("--samples takes N >= 1");
    } else if (arg == "--gap-ms" && i + 1 < argc) {
      if (!parse_int(argv[++i], &gap_ms)) return usage("--gap-ms takes M >= 0");
    } else {
      return usage(("unknown or incomplete option " + arg).c_str());
    }
  }
  constexpr int kTrips = 200000;
  alignas(64) static std::atomic<int> line{0};
  for (int s = 0; s < samples; ++s) {
    line.store(0);
    bool pinned_b = true;
    std::thread other([&] {
      pinned_b = pin(b);
      for (int i = 0; i < kTrips; ++i) {
        while (line.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        line.store(2 * i + 2, std::memory_order_release);
      }
    });
    if (!pin(a)) {
      other.detach();
      std::fprintf(stderr, "nostrum-round-trip-bench: cannot run on CPU %d\n", a);
      return 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kTrips; ++i) {
      line.store(2 * i + 1, std::memory_order_release);
      while (line.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    other.join();
    if (!pinned_b) {
      std::fprintf(stderr, "nostrum-round-trip-bench: cannot run on CPU %d\n", b);
      return 1;
    }
    std::printf("%.0f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / kTrips);
    std::fflush(stdout);
    if (s + 1 < samples) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
  return 0;
}
