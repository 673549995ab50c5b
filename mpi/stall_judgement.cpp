// The stall judgement (see stall_judgement.hpp): the verdict rule, the reason each rank did not
// arrive, and the abort message.
#include "mpi/stall_judgement.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace nostrum::mpi {

namespace {

std::string seconds_text(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f s", ms / 1000.0);
  return text;
}

// Why `r` did not arrive at `wait_step`; empty when it is waiting there.
std::string why_missing(const WatchedRank& r, int64_t wait_step, const StallLimits& limits) {
  if (r.silent_ms > limits.silent_ms)
    return "no heartbeat for " + seconds_text(r.silent_ms) + ": stopped, dead or unreachable";
  if (r.waited_ms < 0) return "not in the collective: still computing, or stuck in I/O";
  if (r.step < wait_step) return "waiting at an earlier step";
  return "";
}

}  // namespace

bool stall_detected(const WatchView& view, const StallLimits& limits) {
  const bool watches_all = view.self.rank == 0;
  bool stalled = view.self.waited_ms >
                 (watches_all ? limits.timeout_ms : limits.timeout_ms + limits.silent_ms);
  for (const WatchedRank& p : view.peers)
    stalled = stalled || p.silent_ms > limits.timeout_ms ||
              (watches_all && p.waited_ms > limits.timeout_ms);
  return stalled;
}

StallVerdict judge_stall(const WatchView& view, const StallLimits& limits) {
  StallVerdict verdict;
  verdict.wait_step = view.self.waited_ms >= 0 ? view.self.step : -1;
  for (const WatchedRank& p : view.peers)
    if (p.waited_ms >= 0) verdict.wait_step = std::max(verdict.wait_step, p.step);
  auto judge = [&](const WatchedRank& r) {
    std::string why = why_missing(r, verdict.wait_step, limits);
    if (why.empty())
      verdict.waiting.push_back(r.rank);
    else
      verdict.missing.push_back({r.rank, r.step, std::move(why)});
  };
  judge(view.self);
  for (const WatchedRank& p : view.peers) judge(p);
  return verdict;
}

bool watcher_paused(int64_t previous_poll_ms, int64_t now_ms, const StallLimits& limits) {
  return now_ms - previous_poll_ms > limits.silent_ms;
}

std::string stall_message(const StallVerdict& verdict, int watcher, double timeout_seconds,
                          int exit_status) {
  std::ostringstream message;
  message << "stall watchdog (rank " << watcher << "): no progress for " << timeout_seconds
          << " s (--stall-timeout)";
  if (verdict.wait_step >= 0) message << " at step " << verdict.wait_step;
  if (verdict.missing.empty())
    message << ": every watched rank is waiting (a deadlock in the collectives?)";
  else
    message << ":";
  for (const MissingRank& m : verdict.missing)
    message << "\n  rank " << m.rank << " did not arrive: last seen at step " << m.step << " ("
            << m.why << ")";
  for (size_t i = 0; i < verdict.waiting.size(); ++i)
    message << (i == 0 ? "\n  waiting in the collective: rank(s) " : ", ") << verdict.waiting[i];
  if (watcher != 0) message << "\n  (this rank watches rank 0 only; rank 0 watches all ranks)";
  message << "\n  aborting the job with status " << exit_status;
  return message.str();
}

}  // namespace nostrum::mpi
