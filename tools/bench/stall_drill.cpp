// nostrum-stall-drill: a training-loop stand-in for the stall watchdog tests and its cost. Each
// step "computes" (fills a gradient arena for --compute-ms), reduces it with the real
// GradientAllreducer (communication thread, overlap), and waits in finish_step under the watchdog.
// Prints "rank R pid P" at start and "step S" on rank 0, so a test can SIGSTOP or SIGKILL a rank by
// pid;
// --hang-rank/--hang-at-step makes one rank's main thread hang (stuck in I/O: heartbeats go on);
// --hold-at-step/--hold-file holds every rank before that step until the file exists (rank 0
// prints "holding at step S"), so a test can act on a run that cannot have ended yet.
// Ends with "steps/s X" (rank 0) for the cost comparison with --stall-timeout 0 (watchdog off).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/stall_watchdog.hpp"

using namespace nostrum;

int main(int argc, char** argv) {
  int steps = 100, compute_ms = 20, hang_rank = -1, hang_at = -1, hold_at = -1;
  std::string hold_file;
  double timeout = 10.0;
  size_t floats = size_t{1} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--steps")
      steps = std::atoi(v);
    else if (a == "--compute-ms")
      compute_ms = std::atoi(v);
    else if (a == "--stall-timeout")
      timeout = std::atof(v);
    else if (a == "--floats")
      floats = std::strtoull(v, nullptr, 10);
    else if (a == "--hang-rank")
      hang_rank = std::atoi(v);
    else if (a == "--hang-at-step")
      hang_at = std::atoi(v);
    else if (a == "--hold-at-step")
      hold_at = std::atoi(v);
    else if (a == "--hold-file")
      hold_file = v;
    else {
      std::fprintf(stderr, "nostrum-stall-drill: unknown option %s\n", a.c_str());
      return 1;
    }
  }
  mpi::MpiSession session(&argc, &argv);
  mpi::Communicator world;
  std::printf("rank %d pid %d\n", world.rank(), static_cast<int>(::getpid()));
  std::fflush(stdout);

  std::vector<float> arena(floats, 0.0f);
  mpi::GradientAllreducer reducer(world, arena.data(), floats, /*bucket_mb=*/1.0, 0.25,
                                  mpi::OverlapMode::kOverlap);
  std::unique_ptr<mpi::StallWatchdog> watchdog;
  if (timeout > 0) {
    mpi::StallWatchdogOptions options;
    options.timeout_seconds = timeout;
    watchdog = std::make_unique<mpi::StallWatchdog>(world, session.thread_level(), options);
    if (!watchdog->enabled()) std::printf("%s\n", watchdog->note().c_str());
  }
  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    if (watchdog) watchdog->set_step(s);
    if (world.rank() == 0) {
      std::printf("step %d\n", s);
      std::fflush(stdout);
    }
    if (s == hold_at && !hold_file.empty()) {  // every rank, outside any collective
      if (world.rank() == 0) {
        std::printf("holding at step %d\n", s);
        std::fflush(stdout);
      }
      while (!std::filesystem::exists(hold_file))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (world.rank() == hang_rank && s == hang_at)
      std::this_thread::sleep_for(std::chrono::hours(1));  // stuck in I/O: only this thread
    reducer.begin_step();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(compute_ms);
    size_t ready = floats;
    while (std::chrono::steady_clock::now() < until || ready > 0) {  // "backward", back to front
      const size_t chunk = std::min<size_t>(ready, floats / 8 + 1);
      for (size_t i = ready - chunk; i < ready; ++i) arena[i] = 1.0f;
      ready -= chunk;
      reducer.on_ready(ready);
    }
    mpi::StallWatchdog::Wait wait(watchdog.get());
    reducer.finish_step();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  world.barrier();
  if (world.rank() == 0) std::printf("steps/s %.3f\n", steps / seconds);
  watchdog.reset();
  return 0;
}
