// The measured choice of a convolution kernel per layer shape and pass: every eligible candidate
// (kernels/conv_candidate.hpp) timed at the run's batch, threads and precision (the median of a
// few calls), the fastest kept; the table of it (printed with --verbose, written to result.json and
// to the cache, kernels/conv_cache.hpp). The chooser is a pure function of the times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/host_steal.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/core/pool_round_trip.hpp"
#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// One pass of one layer shape (g.N: the batch it runs at). In a bf16 run, bf16_in and bf16_d_out
// say that the model hands every layer of this shape its input / output gradient in bf16 where the
// pass's kernel takes it (Model::set_bf16_handover, set_bf16_block_outputs), and bf16_out (a
// forward pass) that it keeps the output in bf16 where the kernel writes it so
// (set_bf16_conv_outputs): the measurement then times such a kernel so, as it will run.
// accumulate_d_in (a backward-data pass): a layer of this shape adds its input gradient onto one
// already there (a residual block's first conv: the block input's gradient is the shortcut's plus
// the path's), which costs a kernel that cannot accumulate (oneDNN's) a second pass over d_in and
// one that can (nostrum's GEMMs: beta = 1) nothing; the measurement times it so.
struct ConvPassShape {
  ConvGeometry g;
  ConvPass pass = ConvPass::kForward;
  bool bf16_in = false, bf16_d_out = false, bf16_out = false;
  bool accumulate_d_in = false;
};
// The same geometry and pass (the operand types aside: a layer's kernel is found by these).
bool same_shape(const ConvPassShape& a, const ConvPassShape& b);
// The same geometry, pass and operand types: a cached row was measured as this pass would be.
bool same_measured_shape(const ConvPassShape& a, const ConvPassShape& b);

// "N32 H56 W56 C64 K64 R3 S3 /1 p1": the geometry as the table, the cache and result.json write it.
std::string conv_shape_name(const ConvGeometry& g);

struct ConvTiming {
  std::string candidate;
  double seconds = 0;  // the median of the timed calls (none: the floor that kept it out)
  int calls = 0;       // timed calls; fewer than asked: cut short, it could not win (see below);
                       // none: not run, its floor alone over the cutoff (time_candidates)
};

// How a row's choice was made.
enum class ConvChoiceSource { kMeasured, kCached, kForced, kFixedRule };
const char* conv_choice_source_name(ConvChoiceSource source);  // measured cached forced fixed

struct ConvChoice {
  ConvPassShape shape;
  std::vector<ConvTiming> timings;  // measured or cached; empty when forced or by the fixed rule
  std::string chosen;               // a candidate's name
  ConvChoiceSource source = ConvChoiceSource::kFixedRule;
  // Measured rows: the round trip between the pool's first two threads (core/pool_round_trip.hpp)
  // just before and just after the candidates were timed, ns (0: not probed).
  double round_trip_ns[2] = {0.0, 0.0};
};

struct ConvChoiceTable {
  Precision precision = Precision::kFp32;
  int threads = 1;
  std::vector<ConvChoice> rows;
  double measure_seconds = 0;  // wall time spent measuring (0 when everything came from a cache)
  int ranks = 1;  // how many processes measured the measured rows at once (pool_conv_tables)
  // Pooled tables of more than one rank: each rank's own time for the pooled choices, summed
  // over the measured rows (every rank ran each choice; empty for one rank).
  std::vector<double> rank_seconds;
  const ConvChoice* find(const ConvPassShape& shape) const;  // nullptr when absent
};

// The chooser: the index of the smallest time of a candidate that ran (calls > 0); on a tie the
// earliest (the registry's order, which measure_conv_pass keeps). Throws ShapeError when none ran.
size_t fastest_timing(const std::vector<ConvTiming>& timings);

// The same rows measured by every rank of a run at once (each on its own pool, all under the run's
// load), pooled into the table every rank then runs: in each measured row, each candidate's time
// the median over the ranks of its time there (of an even count, the mean of the middle two), its
// calls summed, the choice the fastest pooled time (fastest_timing). A candidate some rank did not
// run (its floor alone over the cutoff there: that rank proved it cannot win) enters the median at
// its floor and is not chosen (its calls 0). A candidate missing from some rank's row
// (a rank whose CPU cannot run it) is left out, so the choice runs on every rank. The other rows,
// the round trips and the precision are the first table's; measure_seconds the longest; ranks the
// count. A process's speed moves from one process to the next by more than near-tied candidates
// differ (src/kernels/conv_selection.md, Near-ties); the ranks are such processes. Throws
// ShapeError when the tables do not hold the same rows in the same order, or a row's candidates
// share none.
ConvChoiceTable pool_conv_tables(const std::vector<ConvChoiceTable>& per_rank);

// A note naming every rank whose rank_seconds exceed `ratio` times the median of the other ranks'
// (with two ranks, the other's), with its time and ratio ("" when none does, or the table pools
// fewer than two ranks): the step of a data-parallel run waits for its slowest rank, and the
// measurement has just timed each rank on the same work.
std::string slow_rank_note(const ConvChoiceTable& table, double ratio);

struct ConvMeasureOptions {
  int calls = 3;  // calls per candidate (the median is kept); the first is also its warm-up
  // Short passes get more: as many rounds as min_seconds / the fastest first call, up to
  // max_calls, so that a pass of a tenth of a millisecond is not decided by three calls on a
  // machine whose speed moves by more than the candidates differ.
  // (At 5 ms and 9 calls, passes of 1-7 ms chose differently from one process to the next by
  // 7-36 %, on the Intel Xeon with AMX, 2026-12-03: tools/bench/conv_remeasure.py.)
  int max_calls = 21;
  double min_seconds = 0.02;
  // A candidate is cut short once it cannot win: its first call took more than cutoff times the
  // fastest first call (and, when by at most confirm_seconds or within confirm_ratio times the
  // fastest first call, its second call too), or more than half its calls were slower than the
  // best median so far (its median would be too). Its time is then the median of the calls it
  // made, above the best, so it is not chosen. The second rule is exact; the first takes one call
  // that slow (two near the bar) as proof. Why confirm: a first call can carry a one-time cost (a
  // oneDNN first call of 23.4 ms against its later 1.9 ms), and one call can stall (on the Intel
  // Xeon with AMX, 2026-12-03, a first call took 2.0-4.2x the same candidate's in the next
  // process, 1-3 passes a table: OpenBLAS's 10 ms weight gradient once 43 ms); confirming within
  // 5x cost the bf16 ResNet-50 224 measurement no time there (its losers are further behind).
  double cutoff = 1.25;
  double confirm_seconds = 0.025;
  double confirm_ratio = 5.0;
  // A call during which the hypervisor took CPU time from this machine (its steal counter moved:
  // core/host_steal.hpp) is made again, at most stolen_retries times, the last call kept: a vCPU
  // held off by the host for tens of milliseconds would otherwise cut a candidate with one call or
  // move its median (on the AMD EPYC Zen 5 under KVM, 2026-12-07, calls of 3-16 ms passes took
  // 36-49 ms, one to three passes a table; of a loop's calls twice the median, all coincided with
  // steal). nullptr: not watched (where the calls are not real: the schedule's tests).
  int stolen_retries = 2;
  std::function<int64_t()> steal_ticks = host_steal_ticks;
  // The host state (core/pool_round_trip.hpp) probed before and after a pass is measured (the
  // table shows both readings); a pass during which it changed (same_host_state false) is
  // measured again, at most state_retries times, the last kept: its candidates' first calls
  // (which cut the slow ones) would otherwise be timed in one state and its rounds in the other.
  // (On the AMD EPYC Zen 5 under KVM, 2026-12-07, the passes whose choice did not hold when
  // measured again in another process had been measured in one state both times: near-ties,
  // src/kernels/conv_selection.md, Measuring.) nullptr: not probed.
  int state_retries = 1;
  std::function<double()> round_trip_ns = [] { return pool_round_trip_ns(); };
};

// The tensors the measured calls read and write and the candidates' scratch, shared by every
// pass measured in one run: grown to the largest pass (zero-filled at allocation, so no call
// pays first-touch page faults), the operands filled from a fixed pattern.
class ConvMeasureBuffers {
 public:
  ConvMeasureBuffers() = default;
  // Borrows `floats` floats at `memory` (64-byte aligned; idle while the measurement runs, like a
  // model's activation arena before its first forward), so that measuring adds no memory of its
  // own: each of the three operands and the scratch takes a quarter of it where it fits, an
  // allocation of its own where not. Each is written when handed out (the pattern, or zeros), so
  // no timed call is the first to touch fresh pages. What it used of that memory is zeroed again
  // when this object goes (a model's arena is zero after build, and stays so).
  ConvMeasureBuffers(float* memory, size_t floats);
  ~ConvMeasureBuffers();
  ConvMeasureBuffers(const ConvMeasureBuffers&) = delete;
  ConvMeasureBuffers& operator=(const ConvMeasureBuffers&) = delete;

  // Operand `which` (0, 1: what the pass reads; 2: what it writes), at least `floats` long.
  float* operand(int which, size_t floats);
  float* scratch(size_t floats);  // 64-byte aligned
  // Read operand `which` (0 or 1) as bf16: its first `floats` values rounded (kernels/bf16.hpp),
  // in memory of its own (freed with this object), written when handed out. Memory of its own
  // (here and where a borrowed slot is too small) is mapped as the model's arenas are, on huge
  // pages where they are on (core/page_memory.hpp): oneDNN's AMX 1x1 forward of ResNet-50's
  // layer2.0.conv1 took 5.0 ms on operands in 4 KiB pages against 3.6 on huge pages.
  const uint16_t* bf16_operand(int which, size_t floats);

 private:
  // Slot 0-2: the operands, 3: the scratch. A borrowed slot's first `used` floats were written.
  struct Borrowed {
    float* data = nullptr;
    size_t capacity = 0, used = 0;
  };
  Borrowed borrowed_[4];
  Arena operands_[3];  // memory of its own where a borrowed slot is too small
  PageBuffer words_[2];
  size_t words_of_[2] = {0, 0};  // how many of operand i's values words_[i] holds rounded
  Arena scratch_;
};

// The measuring schedule on its own (planted times test it): call(i) runs candidate i once and
// returns its seconds. Every candidate is called once (its warm-up and first sample), in index
// order, or where `floors` gives lower bounds on their times, lowest floor first (stable), a
// candidate whose floor is over the cutoff times the fastest first call so far not called at all
// (its times stay empty); one whose first call is over the cutoff by at most confirm_seconds is
// called once more at once (in index order), and cut if that call is over too; one further over
// is cut; those not cut then get their other calls in rounds, one call each per round, so that a
// drift of the machine's speed weighs on all alike. Returns every candidate's times, in index
// order.
std::vector<std::vector<double>> time_candidates(size_t count,
                                                 const std::function<double(size_t)>& call,
                                                 const ConvMeasureOptions& options = {},
                                                 const std::vector<double>& floors = {});

// The least time a candidate computing in fp32 can take for a pass of g: its multiply-adds at the
// fp32 FMA register ceiling (one thread's probe, best of three, run once a process, times
// `threads`, which no kernel exceeds); 0 where no probe runs (no AVX2, not x86-64).
// measure_conv_pass gives it to a bf16 run's fp32 candidates as their floor: where the bf16
// candidates, timed first, beat it by the cutoff, they are not run (on an AMD Zen 4 the fp32
// candidates took about 19 of the 28 s a ResNet-50 224 b32 bf16 table took to measure, and none
// was chosen).
double fp32_floor_seconds(const ConvGeometry& g, int threads);

// The call `kernel` is timed with for this pass: the buffers' operands (0 and 1 read, 2 written)
// and scratch (`scratch_floats`), an operand the model hands over in bf16 (shape.bf16_in,
// bf16_d_out, in a bf16 run) as bf16_operand where the kernel takes it (PreparedConv::
// takes_bf16_in, takes_bf16_d_out), as it will run in the model.
ConvCall measurement_call(const ConvPassShape& shape, Precision precision,
                          const PreparedConv& kernel, ConvMeasureBuffers& buffers,
                          size_t scratch_floats);

// Times every eligible candidate for this pass on the calling thread's OpenMP pool (outside any
// parallel region) by time_candidates' schedule; the timings come back in registry order.
// `buffers`: the run's shared ones (nullptr: its own).
std::vector<ConvTiming> measure_conv_pass(const ConvPassShape& shape, Precision precision,
                                          const ConvMeasureOptions& options = {},
                                          ConvMeasureBuffers* buffers = nullptr);

// The rows of a table as one line each: shape, pass, every candidate's time in ms, the chosen one
// and how it was chosen (what --verbose prints).
std::vector<std::string> describe_conv_choices(const ConvChoiceTable& table);

// The table as JSON text (for the broadcast from rank 0, result.json and the cache) and back;
// conv_choices_from_json throws ShapeError naming `what` on malformed text or unknown names.
std::string conv_choices_to_json(const ConvChoiceTable& table);
ConvChoiceTable conv_choices_from_json(const std::string& text, const std::string& what);

}  // namespace nostrum::kernels
