// The round trip between the OpenMP pool's first two threads (core/pool_round_trip.hpp): a
// positive time with a pool of two, bounded by its time limit when the other thread cannot answer
// in time, 0 with one thread or inside a parallel region; same_host_state's factor.
#include <omp.h>

#include <catch2/catch.hpp>

#include "nostrum/core/pool_round_trip.hpp"

using nostrum::pool_round_trip_ns;
using nostrum::same_host_state;

TEST_CASE("the pool's round trip: positive on two threads, 0 on one or inside a region",
          "[core][any-cpu]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  // A reading is positive and no longer than the call took (a trip's time is the call's over the
  // trips made, or the whole call where none finished: threads just made can share one CPU).
  double t0 = omp_get_wtime();
  const double ns = pool_round_trip_ns(200);
  const double call_ns = (omp_get_wtime() - t0) * 1e9;
  CHECK(ns > 0.0);
  CHECK(ns <= call_ns);
  // A limit far shorter than the trips asked for: it stops at the limit (a pool whose threads
  // share one CPU would otherwise spin a time slice a trip) and reports the trips it made.
  t0 = omp_get_wtime();
  CHECK(pool_round_trip_ns(1 << 30, 0.005) > 0.0);
  CHECK(omp_get_wtime() - t0 < 10.0);  // 2^30 trips, at the fastest 20 ns each: 21 s
  omp_set_num_threads(1);
  CHECK(pool_round_trip_ns() == 0.0);
  omp_set_num_threads(2);
  double inside = -1.0;
#pragma omp parallel num_threads(2)
#pragma omp single
  inside = pool_round_trip_ns();
  CHECK(inside == 0.0);
  CHECK(pool_round_trip_ns(0) == 0.0);
  omp_set_num_threads(threads);
}

TEST_CASE("same_host_state: within 2x is one state; a missing reading matches any", "[core]") {
  CHECK(same_host_state(90, 140));
  CHECK(same_host_state(450, 410));
  CHECK(same_host_state(100, 200));
  CHECK_FALSE(same_host_state(90, 450));
  CHECK_FALSE(same_host_state(540, 120));
  CHECK_FALSE(same_host_state(100, 201));
  CHECK(same_host_state(0, 450));
  CHECK(same_host_state(90, 0));
  CHECK(same_host_state(100, 290, 3.0));
}
