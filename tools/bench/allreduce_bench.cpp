// nostrum-allreduce-bench: measures how much of the bucketed gradient allreduce a backward pass
// hides. A fake backward of L equal layers over a P-float gradient arena writes each layer's
// gradient, then spends backward-ms/L (sleeping, or spinning with --busy) and marks it ready.
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "mpi/binding.hpp"
#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "nostrum/core/error.hpp"

namespace po = boost::program_options;
using nostrum::mpi::OverlapMode;

namespace {

struct BenchOptions {
  size_t params = 25557032;  // ResNet-50 v1.5
  size_t layers = 161;
  double backward_ms = 300.0;
  int steps = 5;
  bool busy = false;
  std::vector<double> bucket_mb = {25.0};
  double first_bucket_mb = 1.0;
};

void spend(double seconds, bool busy) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  if (!busy) {
    std::this_thread::sleep_until(until);
    return;
  }
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Mean per-step timings over opts.steps steps (after one warm-up step), max over ranks.
nostrum::mpi::AllreduceTimings run(const nostrum::mpi::Communicator& world,
                                   std::vector<float>& arena, const BenchOptions& opts,
                                   double bucket_mb, OverlapMode mode, double* backward_seconds) {
  nostrum::mpi::GradientAllreducer reducer(world, arena.data(), arena.size(), bucket_mb,
                                           opts.first_bucket_mb, mode);
  const size_t per_layer = (arena.size() + opts.layers - 1) / opts.layers;
  nostrum::mpi::AllreduceTimings total;
  double backward = 0.0;
  for (int step = 0; step <= opts.steps; ++step) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    reducer.begin_step();
    for (size_t l = opts.layers; l-- > 0;) {
      const size_t from = std::min(arena.size(), l * per_layer);
      const size_t to = std::min(arena.size(), from + per_layer);
      for (size_t i = from; i < to; ++i) arena[i] = 1e-3f * static_cast<float>(world.rank() + 1);
      spend(opts.backward_ms * 1e-3 / opts.layers, opts.busy);
      reducer.on_ready(from);
    }
    const double this_backward =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto timings = reducer.finish_step();
    if (step > 0) {  // step 0 warms up connections and buffers
      total += timings;
      backward += this_backward;
    }
  }
  total.allreduce_seconds = world.allreduce_max(total.allreduce_seconds) / opts.steps;
  total.exposed_seconds = world.allreduce_max(total.exposed_seconds) / opts.steps;
  total.hidden_seconds = std::max(0.0, total.allreduce_seconds - total.exposed_seconds);
  total.bytes /= opts.steps;
  *backward_seconds = world.allreduce_max(backward) / opts.steps;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  nostrum::mpi::MpiSession session(&argc, &argv);
  nostrum::mpi::Communicator world;
  BenchOptions opts;
  po::options_description desc("nostrum-allreduce-bench options");
  desc.add_options()("help", "this help")(
      "params", po::value(&opts.params)->default_value(opts.params), "gradient floats")(
      "layers", po::value(&opts.layers)->default_value(opts.layers), "layers of the fake backward")(
      "backward-ms", po::value(&opts.backward_ms)->default_value(opts.backward_ms),
      "backward time per step")("steps", po::value(&opts.steps)->default_value(opts.steps),
                                "measured steps")("busy", po::bool_switch(&opts.busy),
                                                  "spin instead of sleeping in the fake backward")(
      "bucket-mb", po::value(&opts.bucket_mb)->multitoken(), "bucket sizes to compare (MB)")(
      "first-bucket-mb", po::value(&opts.first_bucket_mb)->default_value(opts.first_bucket_mb),
      "first bucket (MB)");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (vm.count("help")) {
      if (world.rank() == 0) std::cout << desc << '\n';
      return 0;
    }
    if (opts.layers < 1 || opts.steps < 1 || opts.params < 1)
      throw nostrum::OptionError("--params, --layers and --steps must be >= 1", "command line");
    if (opts.bucket_mb.empty()) opts.bucket_mb = {25.0};
    nostrum::mpi::print_binding_report(world, std::cout);
    std::vector<float> arena(opts.params);
    if (world.rank() == 0)
      std::printf(
          "%d ranks, %.1f MB of gradients, %zu layers, backward %.0f ms (%s)\n"
          "%-12s %-9s %12s %12s %12s %12s %10s\n",
          world.size(), opts.params * 4e-6, opts.layers, opts.backward_ms,
          opts.busy ? "spinning" : "sleeping", "mode", "bucket_MB", "backward_ms", "allreduce_ms",
          "exposed_ms", "hidden_ms", "hidden_%");
    for (double bucket_mb : opts.bucket_mb) {
      for (OverlapMode mode : {OverlapMode::kSynchronous, OverlapMode::kOverlap}) {
        double backward = 0.0;
        const auto t = run(world, arena, opts, bucket_mb, mode, &backward);
        if (world.rank() == 0)
          std::printf(
              "%-12s %-9g %12.1f %12.1f %12.1f %12.1f %9.0f%%\n",
              mode == OverlapMode::kOverlap ? "overlap" : "synchronous", bucket_mb, backward * 1e3,
              t.allreduce_seconds * 1e3, t.exposed_seconds * 1e3, t.hidden_seconds * 1e3,
              t.allreduce_seconds > 0 ? 100.0 * t.hidden_seconds / t.allreduce_seconds : 0.0);
      }
    }
  } catch (const po::error& e) {
    if (world.rank() == 0) std::cerr << "error: " << e.what() << "\n" << desc << '\n';
    return 2;
  } catch (const nostrum::Error& e) {
    std::cerr << "error (rank " << world.rank() << "): " << e.what() << '\n';
    return 1;
  }
  return 0;
}
