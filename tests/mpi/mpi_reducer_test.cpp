// MpiReducer (sync-BN transport): sums over all ranks or groups of consecutive ranks, bad group
// sizes rejected, and use from the main thread while the gradient thread is reducing.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/mpi_reducer.hpp"
#include "nostrum/core/error.hpp"

using nostrum::mpi::Communicator;
using nostrum::mpi::MpiReducer;

namespace {

// Sum over ranks [first, first + g) of (rank + 1) * (i + 1) * 0.5: exact in double.
double group_sum(int first, int g, size_t i) {
  double s = 0.0;
  for (int r = first; r < first + g; ++r) s += (r + 1) * (i + 1) * 0.5;
  return s;
}

void check_group_sums(const Communicator& world, int requested, int expected_g) {
  MpiReducer reducer(world, requested);
  CHECK(reducer.group_size() == expected_g);
  CHECK(reducer.group_index() == world.rank() / expected_g);
  std::vector<double> stats(37);
  for (size_t i = 0; i < stats.size(); ++i) stats[i] = (world.rank() + 1) * (i + 1) * 0.5;
  reducer.sum(stats.data(), stats.size());
  const int first = (world.rank() / expected_g) * expected_g;
  for (size_t i = 0; i < stats.size(); ++i) REQUIRE(stats[i] == group_sum(first, expected_g, i));
}

}  // namespace

TEST_CASE("MpiReducer sums over all ranks by default and over groups of consecutive ranks",
          "[mpi][reducer]") {
  Communicator world;
  const int p = world.size();
  check_group_sums(world, 0, p);
  check_group_sums(world, p, p);
  check_group_sums(world, 1, 1);
  if (p % 2 == 0) check_group_sums(world, 2, 2);
  std::unique_ptr<nostrum::Reducer> as_interface = std::make_unique<MpiReducer>(world);
  CHECK(as_interface->group_size() == p);
}

TEST_CASE("MpiReducer rejects a group size that does not divide the ranks", "[mpi][reducer]") {
  Communicator world;
  const int p = world.size();
  CHECK_THROWS_AS(MpiReducer(world, -1), nostrum::OptionError);
  CHECK_THROWS_AS(MpiReducer(world, p + 1), nostrum::OptionError);
  if (p == 3) {
    try {
      MpiReducer reducer(world, 2);
      FAIL("group size 2 of 3 ranks accepted");
    } catch (const nostrum::OptionError& e) {
      CHECK(std::string(e.what()).find("sync-BN group size 2") != std::string::npos);
      CHECK(e.where() == "--sync-bn-group");
    }
  }
}

TEST_CASE("MpiReducer works from the main thread while the gradient thread reduces",
          "[mpi][reducer][overlap]") {
  Communicator world;
  const int p = world.size();
  // mpi_main.cpp requests MPI_THREAD_MULTIPLE; Open MPI 4.1 provides it. Less would fail here,
  // which is the point: concurrent use is only legal with it.
  REQUIRE(MpiReducer::concurrent_use_allowed());
  MpiReducer reducer(world);
  const size_t layers = 8, per_layer = 20000;
  std::vector<float> grads(layers * per_layer);
  nostrum::mpi::GradientAllreducer allreducer(world, grads.data(), grads.size(), 0.04, 0.01,
                                              nostrum::mpi::OverlapMode::kOverlap,
                                              /*main_thread_calls_mpi=*/true);
  REQUIRE(allreducer.mode() == nostrum::mpi::OverlapMode::kOverlap);
  for (int step = 0; step < 3; ++step) {
    allreducer.begin_step();
    for (size_t l = layers; l-- > 0;) {
      // batch norm backward: a statistics reduction on the main thread, then the layer's gradient
      std::vector<double> stats = {1.0 * world.rank(), 2.0, 0.5 * step};
      reducer.sum(stats.data(), stats.size());
      REQUIRE(stats[0] == p * (p - 1) / 2.0);
      REQUIRE(stats[1] == 2.0 * p);
      REQUIRE(stats[2] == 0.5 * step * p);
      for (size_t i = l * per_layer; i < (l + 1) * per_layer; ++i)
        grads[i] = static_cast<float>(world.rank() + l + step);
      allreducer.on_ready(l * per_layer);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    allreducer.finish_step();
    size_t wrong = 0;
    for (size_t l = 0; l < layers; ++l)
      for (size_t i = l * per_layer; i < (l + 1) * per_layer; ++i)
        if (grads[i] != static_cast<float>(p * (p - 1) / 2 + p * (l + step))) ++wrong;
    CHECK(wrong == 0);
  }
}
