// The stall watchdog's judgement (mpi/stall_judgement.hpp) as a pure function: when it fires for
// rank 0 and for the other ranks, why each rank is named, and the message.
#include "mpi/stall_judgement.hpp"

#include <catch2/catch.hpp>

using nostrum::mpi::judge_stall;
using nostrum::mpi::stall_detected;
using nostrum::mpi::stall_message;
using nostrum::mpi::StallLimits;
using nostrum::mpi::WatchedRank;
using nostrum::mpi::watcher_paused;
using nostrum::mpi::WatchView;

namespace {

StallLimits limits() {
  StallLimits l;
  l.timeout_ms = 10000;
  l.silent_ms = 5000;
  return l;
}

WatchedRank rank(int r, int64_t step, int64_t waited_ms, int64_t silent_ms) {
  return WatchedRank{r, step, waited_ms, silent_ms};
}

}  // namespace

TEST_CASE("stall judgement: nothing fires while every wait and silence is within the timeout",
          "[stall]") {
  const WatchView view{rank(0, 7, 9000, 0), {rank(1, 7, 9999, 4000), rank(2, 6, -1, 10000)}};
  CHECK_FALSE(stall_detected(view, limits()));
}

TEST_CASE("stall judgement: rank 0 fires on its own wait past the timeout", "[stall]") {
  CHECK(stall_detected(WatchView{rank(0, 3, 10001, 0), {rank(1, 2, -1, 100)}}, limits()));
  CHECK_FALSE(stall_detected(WatchView{rank(0, 3, 10000, 0), {rank(1, 2, -1, 100)}}, limits()));
}

TEST_CASE("stall judgement: another rank waits timeout + silent for rank 0's verdict", "[stall]") {
  CHECK_FALSE(stall_detected(WatchView{rank(1, 3, 15000, 0), {rank(0, 2, -1, 100)}}, limits()));
  CHECK(stall_detected(WatchView{rank(1, 3, 15001, 0), {rank(0, 2, -1, 100)}}, limits()));
}

TEST_CASE("stall judgement: a peer silent past the timeout fires for every watcher", "[stall]") {
  CHECK(stall_detected(WatchView{rank(0, 3, -1, 0), {rank(1, 2, -1, 10001)}}, limits()));
  CHECK(stall_detected(WatchView{rank(1, 3, -1, 0), {rank(0, 2, -1, 10001)}}, limits()));
}

TEST_CASE("stall judgement: only rank 0 judges a peer's wait", "[stall]") {
  CHECK(stall_detected(WatchView{rank(0, 3, -1, 0), {rank(1, 3, 10001, 200)}}, limits()));
  CHECK_FALSE(stall_detected(WatchView{rank(1, 3, -1, 0), {rank(0, 3, 10001, 200)}}, limits()));
}

TEST_CASE("stall verdict: the step reached and why each rank did not arrive", "[stall]") {
  const WatchView view{rank(0, 12, 11000, 0),
                       {rank(1, 12, 10500, 300), rank(2, 12, -1, 300), rank(3, 11, 10800, 200),
                        rank(4, 9, 2000, 6000)}};
  const auto verdict = judge_stall(view, limits());
  CHECK(verdict.wait_step == 12);
  CHECK(verdict.waiting == std::vector<int>{0, 1});
  REQUIRE(verdict.missing.size() == 3);
  CHECK(verdict.missing[0].rank == 2);
  CHECK(verdict.missing[0].why == "not in the collective: still computing, or stuck in I/O");
  CHECK(verdict.missing[1].rank == 3);
  CHECK(verdict.missing[1].step == 11);
  CHECK(verdict.missing[1].why == "waiting at an earlier step");
  CHECK(verdict.missing[2].rank == 4);
  CHECK(verdict.missing[2].why == "no heartbeat for 6 s: stopped, dead or unreachable");
}

TEST_CASE("stall verdict: no waiting rank means no step, the watcher itself can be missing",
          "[stall]") {
  const auto verdict = judge_stall(WatchView{rank(1, 5, -1, 0), {rank(0, 5, -1, 11000)}}, limits());
  CHECK(verdict.wait_step == -1);
  CHECK(verdict.waiting.empty());
  REQUIRE(verdict.missing.size() == 2);
  CHECK(verdict.missing[0].rank == 1);
  CHECK(verdict.missing[1].why == "no heartbeat for 11 s: stopped, dead or unreachable");
}

TEST_CASE("stall message names the missing ranks, the waiting ones and the exit status",
          "[stall]") {
  const WatchView view{rank(0, 12, 11000, 0), {rank(1, 12, 10500, 300), rank(2, 10, -1, 7000)}};
  CHECK(stall_message(judge_stall(view, limits()), 0, 10, 4) ==
        "stall watchdog (rank 0): no progress for 10 s (--stall-timeout) at step 12:\n"
        "  rank 2 did not arrive: last seen at step 10 (no heartbeat for 7 s: stopped, dead or "
        "unreachable)\n"
        "  waiting in the collective: rank(s) 0, 1\n"
        "  aborting the job with status 4");
  const WatchView deadlock{rank(1, 3, 16000, 0), {rank(0, 3, 15000, 100)}};
  CHECK(stall_message(judge_stall(deadlock, limits()), 1, 10, 4) ==
        "stall watchdog (rank 1): no progress for 10 s (--stall-timeout) at step 3: every watched "
        "rank is waiting (a deadlock in the collectives?)\n"
        "  waiting in the collective: rank(s) 1, 0\n"
        "  (this rank watches rank 0 only; rank 0 watches all ranks)\n"
        "  aborting the job with status 4");
}

TEST_CASE("stall judgement: a watcher that did not run past the silence limit was paused",
          "[stall]") {
  CHECK_FALSE(watcher_paused(1000, 1200, limits()));
  CHECK_FALSE(watcher_paused(1000, 6000, limits()));
  CHECK(watcher_paused(1000, 6001, limits()));
}
