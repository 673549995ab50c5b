// Communicator: rank/size, barrier, broadcast, allreduce of float buffers of many sizes, int max,
// gather, allgather, the thread level, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"

using nostrum::mpi::Communicator;

TEST_CASE("communicator reports rank and size like MPI_COMM_WORLD", "[mpi]") {
  Communicator world;
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(world.rank() == rank);
  CHECK(world.size() == size);
  world.barrier();
}

TEST_CASE("broadcast copies rank 0's floats and strings to every rank", "[mpi]") {
  Communicator world;
  std::vector<float> buffer(1000);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = world.rank() == 0 ? 0.5f * i : -1.0f;
  world.broadcast(buffer.data(), buffer.size(), 0);
  for (size_t i = 0; i < buffer.size(); ++i) REQUIRE(buffer[i] == 0.5f * i);

  std::string text = world.rank() == 0 ? "weights checksum 1234" : "";
  world.broadcast(text, 0);
  CHECK(text == "weights checksum 1234");
}

TEST_CASE("allreduce_sum sums float buffers of any size in place", "[mpi]") {
  Communicator world;
  const int p = world.size();
  for (size_t count :
       {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20, (size_t{1} << 22) + 3}) {
    std::vector<float> buffer(count);
    for (size_t i = 0; i < count; ++i) buffer[i] = static_cast<float>((i % 97) + world.rank());
    world.allreduce_sum(buffer.data(), count);
    // sum over ranks of (i%97 + r) = p*(i%97) + p(p-1)/2: small integers, exact in fp32
    const float rank_sum = 0.5f * p * (p - 1);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
      if (buffer[i] != p * static_cast<float>(i % 97) + rank_sum) ++wrong;
    INFO("count " << count);
    CHECK(wrong == 0);
  }
}

TEST_CASE("allreduce of doubles, int64 and max/min", "[mpi]") {
  Communicator world;
  std::vector<int64_t> counts = {world.rank(), 1};
  world.allreduce_sum(counts.data(), counts.size());
  CHECK(counts[0] == int64_t{world.size()} * (world.size() - 1) / 2);
  CHECK(counts[1] == world.size());
  double x = 0.25 * world.rank();
  world.allreduce_sum(&x, 1);
  CHECK(x == Approx(0.25 * world.size() * (world.size() - 1) / 2));
  CHECK(world.allreduce_max(world.rank()) == world.size() - 1);
  CHECK(world.allreduce_min(world.rank()) == 0);
}

TEST_CASE("gather_strings collects every rank's text in rank order on the root", "[mpi]") {
  Communicator world;
  auto all = world.gather_strings("rank" + std::to_string(world.rank()), 0);
  if (world.rank() == 0) {
    REQUIRE(all.size() == static_cast<size_t>(world.size()));
    for (int r = 0; r < world.size(); ++r) CHECK(all[r] == "rank" + std::to_string(r));
  } else {
    CHECK(all.empty());
  }
}

TEST_CASE("allreduce_max of int flags, gather of floats, allgather of uint64", "[mpi]") {
  Communicator world;
  const int p = world.size(), r = world.rank();
  int flags[3] = {r == p - 1 ? 1 : 0, 0, r == 0 ? 7 : r};  // one rank raises the first flag
  world.allreduce_max(flags, 3);
  CHECK(flags[0] == 1);
  CHECK(flags[1] == 0);
  CHECK(flags[2] == std::max(7, p - 1));

  const float mine[2] = {static_cast<float>(r), 0.5f * r};
  std::vector<float> all(r == 1 % p ? 2 * static_cast<size_t>(p) : 0, -1.0f);
  world.gather(mine, 2, all.data(), 1 % p);  // to rank 1 (not rank 0: the root is honoured)
  if (r == 1 % p)
    for (int q = 0; q < p; ++q) {
      CHECK(all[2 * q] == static_cast<float>(q));
      CHECK(all[2 * q + 1] == 0.5f * q);
    }

  const std::vector<uint64_t> ids = world.allgather(0x100000000ULL * r + 3);
  REQUIRE(ids.size() == static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) CHECK(ids[q] == 0x100000000ULL * q + 3);
}

TEST_CASE("thread_level is what MPI provided", "[mpi]") {
  int provided = -1;
  MPI_Query_thread(&provided);
  CHECK(Communicator::thread_level() == provided);
  CHECK(Communicator::thread_level() >= MPI_THREAD_SINGLE);
}

TEST_CASE("a failing MPI call throws MpiError naming the call and the rank", "[mpi]") {
  Communicator world;
  float value = 1.0f;
  try {
    world.broadcast(&value, 1, /*root=*/world.size() + 5);  // invalid root on every rank
    FAIL("broadcast with an invalid root did not throw");
  } catch (const nostrum::MpiError& e) {
    const std::string message = e.what();
    CHECK(message.find("MPI_Bcast") != std::string::npos);
    CHECK(message.find("rank " + std::to_string(world.rank())) != std::string::npos);
  }
}
