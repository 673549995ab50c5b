// Bucketed gradient allreduce: bucket planning, sums equal to a plain allreduce (exactly on exact
// data, to fp32 rounding on random data), boundaries inside tensors, tiny vs huge buckets, every
// rank bit-identical, and the overlap itself (event ordering under a fake backward that waits for
// the first bucket's sum).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "mpi/bucket_plan.hpp"
#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/core/error.hpp"

using nostrum::mpi::Bucket;
using nostrum::mpi::Communicator;
using nostrum::mpi::GradientAllreducer;
using nostrum::mpi::OverlapMode;

namespace {

// A fake model: tensor sizes in forward order, laid out contiguously in one arena.
const std::vector<size_t> kTensorSizes = {432, 16, 16, 2304, 16, 16, 4608, 32, 32, 9216, 320, 10};

std::vector<size_t> tensor_offsets(const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) offsets[i + 1] = offsets[i] + sizes[i];
  return offsets;
}

float exact_value(size_t i, int rank) {
  return static_cast<float>((i * 7 + 3 * rank) % 101) * 0.25f;
}

// Runs one step: a fake backward writes each tensor's gradient (last tensor first) with fill(),
// then marks it ready; after each layer, between_layers(offset the gradients are final from): a
// wait, a check. Returns the step's timings.
template <typename Fill, typename BetweenLayers>
nostrum::mpi::AllreduceTimings fake_backward_step(GradientAllreducer& reducer, float* arena,
                                                  const std::vector<size_t>& offsets, Fill fill,
                                                  BetweenLayers between_layers) {
  reducer.begin_step();
  for (size_t t = offsets.size() - 1; t-- > 0;) {
    for (size_t i = offsets[t]; i < offsets[t + 1]; ++i) arena[i] = fill(i);
    reducer.on_ready(offsets[t]);
    between_layers(offsets[t]);
  }
  return reducer.finish_step();
}

template <typename Fill>
nostrum::mpi::AllreduceTimings fake_backward_step(GradientAllreducer& reducer, float* arena,
                                                  const std::vector<size_t>& offsets, Fill fill) {
  return fake_backward_step(reducer, arena, offsets, fill, [](size_t) {});
}

bool boundary_inside_a_tensor(const std::vector<Bucket>& buckets,
                              const std::vector<size_t>& offsets) {
  for (const auto& b : buckets)
    if (b.offset > 0 && std::find(offsets.begin(), offsets.end(), b.offset) == offsets.end())
      return true;
  return false;
}

}  // namespace

TEST_CASE("buckets cover the arena from its end, the first one small", "[mpi][buckets]") {
  // 1 MB = 250000 floats; 0.1 MB = 25000 floats
  const auto buckets = nostrum::mpi::plan_buckets(600000, 1.0, 0.1);
  REQUIRE(buckets.size() == 4);
  CHECK(buckets[0].offset == 575000);
  CHECK(buckets[0].count == 25000);
  CHECK(buckets[1].offset == 325000);
  CHECK(buckets[1].count == 250000);
  CHECK(buckets[2].offset == 75000);
  CHECK(buckets[3].offset == 0);
  CHECK(buckets[3].count == 75000);
  size_t end = 600000;
  for (const auto& b : buckets) {
    CHECK(b.offset + b.count == end);
    CHECK(b.count > 0);
    end = b.offset;
  }
  CHECK(nostrum::mpi::plan_buckets(0, 25, 1).empty());
  CHECK(nostrum::mpi::plan_buckets(10, 1e-9, 1e-9).size() == 10);  // never below one float
  try {
    nostrum::mpi::plan_buckets(10, 0.0, 1.0);
    FAIL("a zero bucket size was accepted");
  } catch (const nostrum::OptionError& e) {
    CHECK(std::string(e.what()).find("positive number of MB, got 0") != std::string::npos);
    CHECK(e.where() == "--bucket-mb");
  }
  CHECK_THROWS_AS(nostrum::mpi::plan_buckets(10, 25.0, -1.0), nostrum::OptionError);
  CHECK_THROWS_AS(nostrum::mpi::plan_buckets(10, std::nan(""), 1.0), nostrum::OptionError);
}

TEST_CASE("bucketed overlapped sum equals a plain allreduce exactly on exact data",
          "[mpi][buckets]") {
  Communicator world;
  const int p = world.size();
  const auto offsets = tensor_offsets(kTensorSizes);
  const size_t total = offsets.back();
  std::vector<float> arena(total, std::numeric_limits<float>::quiet_NaN());
  // 0.004 MB = 1000 floats, first bucket 300 floats: boundaries fall inside tensors
  GradientAllreducer reducer(world, arena.data(), total, 0.004, 0.0012);
  REQUIRE(reducer.mode() == OverlapMode::kOverlap);
  REQUIRE(reducer.buckets().size() > 5);
  REQUIRE(boundary_inside_a_tensor(reducer.buckets(), offsets));

  for (int step = 0; step < 3; ++step) {  // the allreducer is reused step after step
    std::fill(arena.begin(), arena.end(), std::numeric_limits<float>::quiet_NaN());
    const auto timings = fake_backward_step(reducer, arena.data(), offsets, [&](size_t i) {
      return exact_value(i, world.rank()) + step;
    });
    CHECK(timings.bytes == total * sizeof(float));
    CHECK(timings.allreduce_seconds >= 0.0);
    CHECK(timings.hidden_seconds ==
          Approx(std::max(0.0, timings.allreduce_seconds - timings.exposed_seconds)));

    std::vector<float> plain(total);
    for (size_t i = 0; i < total; ++i) plain[i] = exact_value(i, world.rank()) + step;
    world.allreduce_sum(plain.data(), total);
    size_t wrong = 0, wrong_plain = 0;
    for (size_t i = 0; i < total; ++i) {
      float expected = 0.0f;
      for (int r = 0; r < p; ++r) expected += exact_value(i, r) + step;
      if (std::memcmp(&arena[i], &plain[i], sizeof(float)) != 0) ++wrong;
      if (plain[i] != expected) ++wrong_plain;
    }
    INFO("step " << step);
    CHECK(wrong == 0);
    CHECK(wrong_plain == 0);
    for (const auto& e : reducer.bucket_events()) {
      CHECK(e.ready >= 0.0);
      CHECK(e.start >= e.ready);
      CHECK(e.end >= e.start);
    }
  }
}

TEST_CASE(
    "random data: tiny and huge buckets and a plain allreduce agree to fp32 rounding; ranks "
    "bit-identical",
    "[mpi][buckets]") {
  Communicator world;
  const int p = world.size();
  const auto offsets = tensor_offsets(kTensorSizes);
  const size_t total = offsets.back();
  std::mt19937 rng(1234 + world.rank());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> local(total);
  for (auto& x : local) x = normal(rng) * std::exp(normal(rng));  // mixed magnitudes

  std::vector<float> plain(local), magnitude(total);
  world.allreduce_sum(plain.data(), total);
  for (size_t i = 0; i < total; ++i) magnitude[i] = std::fabs(local[i]);
  world.allreduce_sum(magnitude.data(), total);  // sum over ranks of |x|: bounds the rounding

  struct Setting {
    double bucket_mb, first_mb;
    OverlapMode mode;
  };
  const std::vector<Setting> settings = {
      {0.0004, 0.0001, OverlapMode::kOverlap},     // 100-float buckets, 25-float first
      {0.004, 0.0012, OverlapMode::kOverlap},      // boundaries inside tensors
      {1000.0, 1000.0, OverlapMode::kOverlap},     // one bucket
      {0.004, 0.0012, OverlapMode::kSynchronous},  // same buckets, no overlap
  };
  std::vector<std::vector<float>> results;
  for (const auto& s : settings) {
    std::vector<float> arena(total, std::numeric_limits<float>::quiet_NaN());
    GradientAllreducer reducer(world, arena.data(), total, s.bucket_mb, s.first_mb, s.mode);
    fake_backward_step(reducer, arena.data(), offsets, [&](size_t i) { return local[i]; });
    // every rank ends with bit-identical gradients
    CHECK_NOTHROW(nostrum::mpi::verify_identical(world, arena.data(), total, "reduced gradients"));
    results.push_back(arena);
  }
  // (p - 1) additions, each rounding by at most eps/2 of a partial sum bounded by sum |x|
  const float eps = std::numeric_limits<float>::epsilon();
  for (size_t k = 0; k < results.size(); ++k) {
    size_t outside = 0;
    for (size_t i = 0; i < total; ++i) {
      const float bound = (p - 1) * eps * magnitude[i];
      if (!(std::fabs(results[k][i] - plain[i]) <= bound)) ++outside;
    }
    INFO("setting " << k);
    CHECK(outside == 0);
  }
  // Same buckets, overlapped or not: the same MPI_Allreduce calls, so bit-identical results.
  CHECK(std::memcmp(results[1].data(), results[3].data(), total * sizeof(float)) == 0);
  if (p == 2) {  // a + b is one rounding whatever the algorithm: every setting is bit-identical
    for (const auto& r : results)
      CHECK(std::memcmp(r.data(), plain.data(), total * sizeof(float)) == 0);
  }
}

TEST_CASE("overlap: buckets are reduced while the fake backward is still running",
          "[mpi][buckets][overlap]") {
  Communicator world;
  const auto offsets = tensor_offsets(kTensorSizes);
  const size_t total = offsets.back();
  std::vector<float> arena(total);
  auto fill = [&](size_t i) { return exact_value(i, world.rank()); };

  // 0.02 MB = 5000 floats, first 0.002 MB = 500 floats: several buckets, each ready mid-backward
  GradientAllreducer overlapped(world, arena.data(), total, 0.02, 0.002, OverlapMode::kOverlap);
  REQUIRE(overlapped.buckets().size() >= 3);
  world.barrier();
  // After the layer that makes bucket 0 (the arena's tail) ready, backward waits until the
  // communication thread has summed it: it must, before backward ends and without finish_step
  // (60 s: a hang, not a slow machine).
  const size_t bucket0_from = overlapped.buckets()[0].offset;
  bool waited = false, bucket0_reduced_during_backward = false;
  fake_backward_step(overlapped, arena.data(), offsets, fill, [&](size_t ready_from) {
    if (waited || ready_from > bucket0_from) return;
    waited = true;
    REQUIRE(ready_from > 0);  // layers remain: backward is still running
    bucket0_reduced_during_backward = overlapped.wait_until_reduced(1, 60.0);
  });
  CHECK(bucket0_reduced_during_backward);
  const auto events = overlapped.bucket_events();
  const double backward_end = events.back().ready;  // the last bucket is ready when backward ends
  CHECK(events[0].end < backward_end);
  for (size_t b = 0; b < events.size(); ++b) {
    CHECK(events[b].start >= events[b].ready);               // never reduced before it was final
    if (b > 0) CHECK(events[b].start >= events[b - 1].end);  // one at a time, in the fixed order
    if (b > 0) CHECK(events[b].ready >= events[b - 1].ready);
  }
  std::vector<float> sums(arena);

  // The synchronous mode reduces nothing before backward is over, and gets the same bits.
  GradientAllreducer synchronous(world, arena.data(), total, 0.02, 0.002,
                                 OverlapMode::kSynchronous);
  CHECK(synchronous.mode() == OverlapMode::kSynchronous);
  world.barrier();
  // ... nothing is summed before finish_step, however long backward takes.
  bool reduced_during_backward = false;
  const auto timings = fake_backward_step(synchronous, arena.data(), offsets, fill, [&](size_t) {
    reduced_during_backward = reduced_during_backward || synchronous.wait_until_reduced(1, 0.0);
  });
  CHECK_FALSE(reduced_during_backward);
  for (const auto& e : synchronous.bucket_events())
    CHECK(e.start >= synchronous.bucket_events().back().ready);
  CHECK(timings.exposed_seconds == timings.allreduce_seconds);
  CHECK(timings.hidden_seconds == 0.0);
  CHECK(std::memcmp(sums.data(), arena.data(), total * sizeof(float)) == 0);
}

TEST_CASE("the allreducer reports its thread level and rejects misuse", "[mpi][buckets]") {
  Communicator world;
  int level = 0;
  MPI_Query_thread(&level);
  std::vector<float> arena(100, 1.0f);
  GradientAllreducer reducer(world, arena.data(), arena.size(), 25.0, 1.0, OverlapMode::kOverlap,
                             /*main_thread_calls_mpi=*/true);
  CHECK(reducer.thread_level() == level);
  if (level >= MPI_THREAD_MULTIPLE) {
    CHECK(reducer.mode() == OverlapMode::kOverlap);
  } else {
    CHECK(reducer.mode() == OverlapMode::kSynchronous);
    CHECK(reducer.mode_note().find("MPI_THREAD_MULTIPLE") != std::string::npos);
  }
  CHECK_THROWS_AS(reducer.finish_step(), nostrum::MpiError);
  reducer.begin_step();
  CHECK_THROWS_AS(reducer.begin_step(), nostrum::MpiError);
  reducer.on_ready(50);
  reducer.on_ready(70);                        // a larger watermark is ignored
  const auto timings = reducer.finish_step();  // marks the rest ready itself
  CHECK(timings.bytes == 400);
  for (float x : arena) CHECK(x == static_cast<float>(world.size()));
}

TEST_CASE("a lower MPI thread level falls back to synchronous and says why", "[mpi][buckets]") {
  using nostrum::mpi::effective_overlap_mode;
  std::string note;
  CHECK(effective_overlap_mode(OverlapMode::kOverlap, MPI_THREAD_MULTIPLE, true, &note) ==
        OverlapMode::kOverlap);
  CHECK(effective_overlap_mode(OverlapMode::kOverlap, MPI_THREAD_SERIALIZED, false, &note) ==
        OverlapMode::kOverlap);
  CHECK(note.find("MPI_THREAD_SERIALIZED") != std::string::npos);
  CHECK(effective_overlap_mode(OverlapMode::kOverlap, MPI_THREAD_SERIALIZED, true, &note) ==
        OverlapMode::kSynchronous);
  CHECK(note ==
        "MPI provides MPI_THREAD_SERIALIZED, overlap needs MPI_THREAD_MULTIPLE (the main thread "
        "calls MPI "
        "during backward): gradients are reduced after backward, nothing is hidden");
  for (int level : {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED}) {
    CHECK(effective_overlap_mode(OverlapMode::kOverlap, level, false, &note) ==
          OverlapMode::kSynchronous);
    CHECK(note.find("overlap needs MPI_THREAD_SERIALIZED") != std::string::npos);
  }
  CHECK(effective_overlap_mode(OverlapMode::kSynchronous, MPI_THREAD_MULTIPLE, false) ==
        OverlapMode::kSynchronous);
}
