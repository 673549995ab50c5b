// The measured choice of a convolution kernel: timing the eligible candidates of one pass, the
// chooser, and the table's text and JSON forms (conv_choice.hpp).
#include "nostrum/kernels/conv_choice.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/precision_choice.hpp"

namespace nostrum::kernels {

using Json = nlohmann::ordered_json;

namespace {

// ConvChoiceSource's names, in enum order.
const std::vector<std::string>& conv_choice_source_names() {
  static const std::vector<std::string> names = {"measured", "cached", "forced", "fixed"};
  return names;
}

}  // namespace

bool same_shape(const ConvPassShape& a, const ConvPassShape& b) {
  const ConvGeometry &x = a.g, &y = b.g;
  return a.pass == b.pass && x.N == y.N && x.H == y.H && x.W == y.W && x.C == y.C && x.K == y.K &&
         x.R == y.R && x.S == y.S && x.stride == y.stride && x.pad == y.pad;
}

bool same_measured_shape(const ConvPassShape& a, const ConvPassShape& b) {
  return same_shape(a, b) && a.bf16_in == b.bf16_in && a.bf16_d_out == b.bf16_d_out &&
         a.accumulate_d_in == b.accumulate_d_in && a.bf16_out == b.bf16_out;
}

std::string conv_shape_name(const ConvGeometry& g) {
  char text[128];
  std::snprintf(text, sizeof text, "N%d H%d W%d C%d K%d R%d S%d /%d p%d", g.N, g.H, g.W, g.C, g.K,
                g.R, g.S, g.stride, g.pad);
  return text;
}

const char* conv_choice_source_name(ConvChoiceSource source) {
  return conv_choice_source_names()[int(source)].c_str();
}

const ConvChoice* ConvChoiceTable::find(const ConvPassShape& shape) const {
  for (const ConvChoice& row : rows)
    if (same_shape(row.shape, shape)) return &row;
  return nullptr;
}

size_t fastest_timing(const std::vector<ConvTiming>& timings) {
  size_t best = timings.size();
  for (size_t i = 0; i < timings.size(); ++i)
    if (timings[i].calls > 0 &&
        (best == timings.size() || timings[i].seconds < timings[best].seconds))
      best = i;
  NOSTRUM_CHECK(best < timings.size(), ShapeError, "no candidate was timed", "conv kernel choice");
  return best;
}

namespace {

// The median of values (not empty), of an even count the mean of the middle two.
double median_of_values(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

ConvChoiceTable pool_conv_tables(const std::vector<ConvChoiceTable>& per_rank) {
  NOSTRUM_CHECK(!per_rank.empty(), ShapeError, "no table to pool", "conv kernel choice");
  ConvChoiceTable pooled = per_rank[0];
  pooled.ranks = int(per_rank.size());
  for (const ConvChoiceTable& t : per_rank) {
    NOSTRUM_CHECK(t.rows.size() == pooled.rows.size(), ShapeError,
                  "a rank measured " + std::to_string(t.rows.size()) + " conv passes, rank 0 " +
                      std::to_string(pooled.rows.size()),
                  "conv kernel choice");
    pooled.measure_seconds = std::max(pooled.measure_seconds, t.measure_seconds);
  }
  for (size_t r = 0; r < pooled.rows.size(); ++r) {
    ConvChoice& row = pooled.rows[r];
    const std::string what = conv_shape_name(row.shape.g) + " " + conv_pass_name(row.shape.pass);
    for (const ConvChoiceTable& t : per_rank)
      NOSTRUM_CHECK(
          same_measured_shape(t.rows[r].shape, row.shape) && t.rows[r].source == row.source,
          ShapeError, "the ranks' conv kernel tables differ at row " + std::to_string(r), what);
    if (row.source != ConvChoiceSource::kMeasured) continue;
    std::vector<ConvTiming> timings;
    for (const ConvTiming& mine : row.timings) {
      std::vector<double> seconds;
      int calls = 0;
      bool every_rank_ran = true;
      for (const ConvChoiceTable& t : per_rank)
        for (const ConvTiming& theirs : t.rows[r].timings)
          if (theirs.candidate == mine.candidate) {
            seconds.push_back(theirs.seconds);
            calls += theirs.calls;
            every_rank_ran = every_rank_ran && theirs.calls > 0;
            break;
          }
      if (seconds.size() < per_rank.size()) continue;  // some rank cannot run it
      // Not run on some rank (its floor alone over the cutoff there): that rank proved it cannot
      // win, so it is not chosen (calls 0), whatever the others' times.
      if (!every_rank_ran) calls = 0;
      timings.push_back(ConvTiming{mine.candidate, median_of_values(seconds), calls});
    }
    NOSTRUM_CHECK(std::any_of(timings.begin(), timings.end(),
                              [](const ConvTiming& t) { return t.calls > 0; }),
                  ShapeError, "no candidate ran on every rank", what);
    row.timings = timings;
    row.chosen = row.timings[fastest_timing(row.timings)].candidate;
  }
  // Each rank's own time for the pooled choices (every rank ran each of them).
  if (per_rank.size() > 1) {
    pooled.rank_seconds.assign(per_rank.size(), 0.0);
    for (size_t r = 0; r < pooled.rows.size(); ++r) {
      const ConvChoice& row = pooled.rows[r];
      if (row.source != ConvChoiceSource::kMeasured) continue;
      for (size_t k = 0; k < per_rank.size(); ++k)
        for (const ConvTiming& t : per_rank[k].rows[r].timings)
          if (t.candidate == row.chosen) pooled.rank_seconds[k] += t.seconds;
    }
  }
  return pooled;
}

std::string slow_rank_note(const ConvChoiceTable& table, double ratio) {
  const std::vector<double>& seconds = table.rank_seconds;
  std::string slow;
  for (size_t k = 0; k < seconds.size() && seconds.size() > 1; ++k) {
    std::vector<double> others;  // the median of the other ranks: with two ranks, the other one
    for (size_t o = 0; o < seconds.size(); ++o)
      if (o != k) others.push_back(seconds[o]);
    const double median = median_of_values(others);
    if (!(median > 0.0) || seconds[k] <= ratio * median) continue;
    char text[128];
    std::snprintf(text, sizeof text, "%s rank %zu %.3g s, %.2fx the others' median %.3g s",
                  slow.empty() ? "" : ";", k, seconds[k], seconds[k] / median, median);
    slow += text;
  }
  if (slow.empty()) return "";
  return "the chosen conv kernels ran slower on some ranks than on the others:" + slow +
         " (a slower core or node, from its clock, another job or its binding, holds back every "
         "synchronous step; the binding table names its host and cores)";
}

namespace {

// A value in [-1, 1) from an index: a fixed pattern, the same whatever the buffer's growth.
inline float pattern(uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return float(int32_t(uint32_t(x))) * (1.0f / 2147483648.0f);
}

double median_of(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// p[i] = pattern(base + i) for i in [begin, end), on the pool.
void fill_pattern(float* p, uint64_t base, size_t begin, size_t end) {
#pragma omp parallel for schedule(static)
  for (int64_t i = int64_t(begin); i < int64_t(end); ++i) p[i] = pattern(base + uint64_t(i));
}

void fill_zero(float* p, size_t begin, size_t end) {
#pragma omp parallel for schedule(static)
  for (int64_t i = int64_t(begin); i < int64_t(end); ++i) p[i] = 0.0f;
}

}  // namespace

ConvMeasureBuffers::ConvMeasureBuffers(float* memory, size_t floats) {
  if (!memory) return;
  const size_t quarter = floats / 4 / Arena::kAlignFloats * Arena::kAlignFloats;
  for (int i = 0; i < 4; ++i) borrowed_[i] = Borrowed{memory + size_t(i) * quarter, quarter, 0};
}

ConvMeasureBuffers::~ConvMeasureBuffers() {
  for (Borrowed& b : borrowed_) fill_zero(b.data, 0, b.used);
}

float* ConvMeasureBuffers::operand(int which, size_t floats) {
  const uint64_t base = uint64_t(which) << 40;
  Borrowed& b = borrowed_[which];
  if (floats <= b.capacity) {
    if (b.used < floats) {
      if (which < 2)
        fill_pattern(b.data, base, b.used, floats);
      else
        fill_zero(b.data, b.used, floats);
      b.used = floats;
    }
    return b.data;
  }
  // Memory of its own, as the scratch's: an arena (huge pages where on), zeroed when made; the
  // inputs' pattern written over all of it.
  Arena& own = operands_[which];
  if (own.capacity() < floats) {
    own = Arena();  // the smaller one gone before the larger is made
    own = Arena(floats, "conv measurement operand");
    if (which < 2) fill_pattern(own.data(), base, 0, own.capacity());
  }
  return own.data();
}

const uint16_t* ConvMeasureBuffers::bf16_operand(int which, size_t floats) {
  const float* values = operand(which, floats);
  PageBuffer& words = words_[which];
  if (words_of_[which] != floats) {
    words.reserve(floats * sizeof(uint16_t), "conv measurement bf16 operand");
    convert_to_bf16(static_cast<uint16_t*>(words.data()), values, int64_t(floats));
    words_of_[which] = floats;
  }
  return static_cast<const uint16_t*>(words.data());
}

float* ConvMeasureBuffers::scratch(size_t floats) {
  Borrowed& b = borrowed_[3];
  if (floats <= b.capacity) {
    // Written once before any timed call: the borrowed pages may be fresh (a model's activation
    // arena), and the first candidate timed would otherwise pay their page faults.
    if (b.used < floats) {
      fill_zero(b.data, b.used, floats);
      b.used = floats;
    }
    return b.data;
  }
  if (scratch_.capacity() < floats) scratch_ = Arena(floats, "conv measurement scratch");
  return scratch_.data();
}

std::vector<std::vector<double>> time_candidates(size_t count,
                                                 const std::function<double(size_t)>& call,
                                                 const ConvMeasureOptions& options,
                                                 const std::vector<double>& floors) {
  std::vector<std::vector<double>> seconds(count);
  if (count == 0) return seconds;
  // One call of candidate i, made again while the host stole time from it (see the options).
  const auto timed = [&](size_t i) {
    for (int attempt = 0;; ++attempt) {
      const int64_t before = options.steal_ticks ? options.steal_ticks() : -1;
      const double s = call(i);
      if (before < 0 || attempt >= options.stolen_retries || options.steal_ticks() == before)
        return s;
    }
  };
  // First calls (warm-up, first sample), lowest floor first; a candidate whose floor is over the
  // cutoff times the fastest first call so far is not called at all (it cannot win).
  const auto floor_of = [&](size_t i) { return i < floors.size() ? floors[i] : 0.0; };
  std::vector<size_t> first_order(count);
  for (size_t i = 0; i < count; ++i) first_order[i] = i;
  std::stable_sort(first_order.begin(), first_order.end(),
                   [&](size_t a, size_t b) { return floor_of(a) < floor_of(b); });
  double fastest_first = HUGE_VAL;
  for (size_t i : first_order) {
    if (floor_of(i) > options.cutoff * fastest_first) continue;
    seconds[i].push_back(timed(i));
    fastest_first = std::min(fastest_first, seconds[i][0]);
  }
  // In the race: not clearly slower at once. A first call over the cutoff by at most
  // confirm_seconds, or within confirm_ratio times the fastest first call, is confirmed by a
  // second before the candidate is cut: a first call can pay a one-time cost (a library's lazy
  // set-up, fresh pages, the host's stall), and one such call must not decide the pass. Slower by
  // more than both, one call is the proof (a second call of every losing candidate would double
  // the measurement).
  const double bar = options.cutoff * fastest_first;
  const double confirm_below =
      std::max(bar + options.confirm_seconds, options.confirm_ratio * fastest_first);
  std::vector<bool> racing(count);
  for (size_t i = 0; i < count; ++i) {
    if (seconds[i].empty()) continue;  // not run: out of the race
    racing[i] = seconds[i][0] <= bar;
    if (racing[i] || seconds[i][0] > confirm_below) continue;
    seconds[i].push_back(timed(i));
    racing[i] = seconds[i][1] <= bar;
  }
  // The rest of the calls in rounds, one call of every candidate still racing per round (a drift
  // of the machine's speed then weighs on all alike); after each round, a candidate with more
  // than half its calls slower than the best median so far drops out (its median would be too).
  int calls = std::max(1, options.calls);
  if (fastest_first > 0.0 && options.max_calls > calls)
    calls = int(
        std::min<double>(options.max_calls,
                         std::max<double>(calls, std::ceil(options.min_seconds / fastest_first))));
  for (int round = 1; round < calls; ++round) {
    for (size_t i = 0; i < count; ++i)  // a confirmed candidate has this round's call already
      if (racing[i] && seconds[i].size() <= size_t(round)) seconds[i].push_back(timed(i));
    double best = HUGE_VAL;
    for (size_t i = 0; i < count; ++i)
      if (racing[i]) best = std::min(best, median_of(seconds[i]));
    for (size_t i = 0; i < count; ++i) {
      if (!racing[i]) continue;
      int slower = 0;
      for (double t : seconds[i]) slower += t > best;
      if (2 * slower > calls) racing[i] = false;
    }
  }
  return seconds;
}

ConvCall measurement_call(const ConvPassShape& shape, Precision precision,
                          const PreparedConv& kernel, ConvMeasureBuffers& buffers,
                          size_t scratch_floats) {
  const ConvGeometry& g = shape.g;
  const size_t in_floats = g.input_floats(), out_floats = g.output_floats();
  const size_t weight_floats = g.weight_floats();
  // What the pass reads (operands 0 and 1) and writes (operand 2).
  const size_t first_floats = shape.pass == ConvPass::kBackwardData ? out_floats : in_floats;
  const size_t second_floats =
      shape.pass == ConvPass::kBackwardWeights ? out_floats : weight_floats;
  const float* first = buffers.operand(0, first_floats);
  const float* second = buffers.operand(1, second_floats);
  float* result = buffers.operand(2, shape.pass == ConvPass::kForward        ? out_floats
                                     : shape.pass == ConvPass::kBackwardData ? in_floats
                                                                             : weight_floats);
  const bool bf16 = precision == Precision::kBf16;
  const bool in_bf16 = bf16 && shape.bf16_in && kernel.takes_bf16_in();
  const bool d_out_bf16 = bf16 && shape.bf16_d_out && kernel.takes_bf16_d_out();
  const bool out_bf16 = bf16 && shape.bf16_out && kernel.writes_bf16_out();
  ConvCall call;
  call.N = g.N;
  switch (shape.pass) {
    case ConvPass::kForward:
      call.in = first, call.weight = second, call.out = result;
      if (in_bf16) call.in = nullptr, call.in_bf16 = buffers.bf16_operand(0, first_floats);
      if (out_bf16) call.out = nullptr, call.out_bf16 = reinterpret_cast<uint16_t*>(result);
      break;
    case ConvPass::kBackwardData:
      call.d_out = first, call.weight = second, call.d_in = result;
      call.accumulate_d_in = shape.accumulate_d_in;  // onto the previous call's sums: no matter
      if (d_out_bf16) call.d_out = nullptr, call.d_out_bf16 = buffers.bf16_operand(0, first_floats);
      break;
    case ConvPass::kBackwardWeights:
      call.in = first, call.d_out = second, call.d_weight = result;
      if (in_bf16) call.in = nullptr, call.in_bf16 = buffers.bf16_operand(0, first_floats);
      if (d_out_bf16)
        call.d_out = nullptr, call.d_out_bf16 = buffers.bf16_operand(1, second_floats);
      break;
  }
  call.scratch = buffers.scratch(scratch_floats);
  return call;
}

double fp32_floor_seconds(const ConvGeometry& g, int threads) {
  static const double per_thread_gflops = [] {
    double best = 0;
    for (int r = 0; r < 3; ++r) best = std::max(best, fp32_fma_probe_gflops(int64_t(1) << 20));
    return best;
  }();
  if (per_thread_gflops <= 0.0 || threads <= 0) return 0.0;
  return g.forward_flops() / (per_thread_gflops * 1e9 * threads);
}

std::vector<ConvTiming> measure_conv_pass(const ConvPassShape& shape, Precision precision,
                                          const ConvMeasureOptions& options,
                                          ConvMeasureBuffers* shared) {
  ConvMeasureBuffers own;
  ConvMeasureBuffers& buffers = shared ? *shared : own;
  const ConvGeometry& g = shape.g;
  // Every eligible candidate prepared, in registry order, on one scratch.
  struct Entry {
    const ConvCandidate* candidate;
    std::unique_ptr<PreparedConv> kernel;
  };
  std::vector<Entry> entries;
  size_t scratch_floats = 1;
  for (const ConvCandidate* c : conv_candidates()) {
    if (!conv_candidate_eligible(*c, g, shape.pass, precision)) continue;
    entries.push_back({c, prepare_conv_candidate(*c, g, shape.pass, precision)});
    scratch_floats = std::max(scratch_floats, entries.back().kernel->scratch_floats());
  }
  NOSTRUM_CHECK(!entries.empty(), ShapeError, "no conv candidate can run this pass",
                conv_shape_name(g) + " " + conv_pass_name(shape.pass));
  // Each candidate's call (its operands as the model gives them), all before any is timed.
  std::vector<ConvCall> calls;
  for (const Entry& e : entries)
    calls.push_back(measurement_call(shape, precision, *e.kernel, buffers, scratch_floats));
  // A bf16 run's fp32 candidates compute at the fp32 rate: their floor is the pass at the fp32
  // FMA register ceiling, and the bf16 ones, timed first, may leave them no chance at all.
  std::vector<double> floors(entries.size(), 0.0);
  if (precision == Precision::kBf16) {
    const double fp32_floor = fp32_floor_seconds(g, omp_get_max_threads());
    for (size_t i = 0; i < entries.size(); ++i)
      if (!entries[i].candidate->supports(Precision::kBf16)) floors[i] = fp32_floor;
  }
  const std::vector<std::vector<double>> seconds = time_candidates(
      entries.size(),
      [&](size_t i) {
        const double t0 = omp_get_wtime();
        entries[i].kernel->run(calls[i]);
        return omp_get_wtime() - t0;
      },
      options, floors);
  std::vector<ConvTiming> timings;
  for (size_t i = 0; i < entries.size(); ++i)
    timings.push_back(seconds[i].empty()
                          ? ConvTiming{entries[i].candidate->name(), floors[i], 0}
                          : ConvTiming{entries[i].candidate->name(), median_of(seconds[i]),
                                       int(seconds[i].size())});
  return timings;
}

std::vector<std::string> describe_conv_choices(const ConvChoiceTable& table) {
  std::vector<std::string> lines;
  for (const ConvChoice& row : table.rows) {
    std::string line = conv_shape_name(row.shape.g) + " " + conv_pass_name(row.shape.pass) + ":";
    int most = 0;  // the calls of the candidates that ran every round
    for (const ConvTiming& t : row.timings) most = std::max(most, t.calls);
    for (const ConvTiming& t : row.timings) {
      // In ms to 4 significant digits at least (3 decimals, up to 6 for a pass of microseconds:
      // the classifier's 3 us weight gradient at 0.003 would read 0.0025-0.0035 as one).
      const double ms = t.seconds * 1e3;
      const int decimals = ms > 0.0 ? std::clamp(3 - int(std::floor(std::log10(ms))), 3, 6) : 3;
      char text[96];
      if (t.calls == 0)  // not run: its floor alone was over the cutoff
        std::snprintf(text, sizeof text, " %s >%.*f ms", t.candidate.c_str(), decimals, ms);
      else
        std::snprintf(text, sizeof text, " %s %.*f ms%s", t.candidate.c_str(), decimals, ms,
                      t.calls < most ? "*" : "");
      line += text;
    }
    line += " -> " + row.chosen + " (" + conv_choice_source_name(row.source) + ")";
    if (row.shape.bf16_in || row.shape.bf16_d_out || row.shape.bf16_out)
      line += std::string(" [bf16 operands:") + (row.shape.bf16_in ? " in" : "") +
              (row.shape.bf16_d_out ? " d_out" : "") + (row.shape.bf16_out ? " out" : "") + "]";
    if (row.shape.accumulate_d_in) line += " [d_in +=]";
    if (row.round_trip_ns[0] > 0.0 || row.round_trip_ns[1] > 0.0) {
      char text[64];
      std::snprintf(text, sizeof text, " [round trip %.0f %.0f ns]", row.round_trip_ns[0],
                    row.round_trip_ns[1]);
      line += text;
    }
    lines.push_back(line);
  }
  return lines;
}

namespace {

Json geometry_json(const ConvGeometry& g) {
  return Json{{"N", g.N}, {"H", g.H}, {"W", g.W},           {"C", g.C},    {"K", g.K},
              {"R", g.R}, {"S", g.S}, {"stride", g.stride}, {"pad", g.pad}};
}

}  // namespace

std::string conv_choices_to_json(const ConvChoiceTable& table) {
  Json rows = Json::array();
  for (const ConvChoice& row : table.rows) {
    Json timings = Json::array();
    for (const ConvTiming& t : row.timings)
      timings.push_back(
          Json{{"candidate", t.candidate}, {"seconds", t.seconds}, {"calls", t.calls}});
    rows.push_back(
        Json{{"shape", geometry_json(row.shape.g)},
             {"pass", conv_pass_name(row.shape.pass)},
             {"bf16_in", row.shape.bf16_in},
             {"bf16_d_out", row.shape.bf16_d_out},
             {"bf16_out", row.shape.bf16_out},
             {"accumulate_d_in", row.shape.accumulate_d_in},
             {"timings", timings},
             {"chosen", row.chosen},
             {"source", conv_choice_source_name(row.source)},
             {"round_trip_ns", Json::array({row.round_trip_ns[0], row.round_trip_ns[1]})}});
  }
  const Json j{{"precision", precision_name(table.precision)}, {"threads", table.threads},
               {"measure_seconds", table.measure_seconds},     {"ranks", table.ranks},
               {"rank_seconds", table.rank_seconds},           {"rows", rows}};
  return j.dump();
}

ConvChoiceTable conv_choices_from_json(const std::string& text, const std::string& what) {
  ConvChoiceTable table;
  try {
    const Json j = Json::parse(text);
    table.precision = parse_precision(j.at("precision").get<std::string>());
    table.threads = j.at("threads").get<int>();
    table.measure_seconds = j.at("measure_seconds").get<double>();
    table.ranks = j.value("ranks", 1);  // absent from tables written before ranks pooled
    if (j.contains("rank_seconds"))
      table.rank_seconds = j.at("rank_seconds").get<std::vector<double>>();
    NOSTRUM_CHECK(table.ranks >= 1, ShapeError,
                  "malformed conv kernel table: ranks " + std::to_string(table.ranks), what);
    for (const Json& r : j.at("rows")) {
      ConvChoice row;
      const Json& s = r.at("shape");
      ConvGeometry& g = row.shape.g;
      g.N = s.at("N"), g.H = s.at("H"), g.W = s.at("W"), g.C = s.at("C"), g.K = s.at("K");
      g.R = s.at("R"), g.S = s.at("S"), g.stride = s.at("stride"), g.pad = s.at("pad");
      row.shape.pass =
          parse_enum_name<ConvPass>(r.at("pass").get<std::string>(), conv_pass_names(), "pass");
      row.shape.bf16_in = r.at("bf16_in").get<bool>();
      row.shape.bf16_d_out = r.at("bf16_d_out").get<bool>();
      row.shape.bf16_out = r.at("bf16_out").get<bool>();
      row.shape.accumulate_d_in = r.at("accumulate_d_in").get<bool>();
      for (const Json& t : r.at("timings"))
        row.timings.push_back(ConvTiming{t.at("candidate").get<std::string>(),
                                         t.at("seconds").get<double>(), t.at("calls").get<int>()});
      row.chosen = r.at("chosen").get<std::string>();
      row.source = parse_enum_name<ConvChoiceSource>(r.at("source").get<std::string>(),
                                                     conv_choice_source_names(), "source");
      // A planned row still to be measured (plan_conv_kernels) has no choice yet.
      const bool to_measure = row.source == ConvChoiceSource::kMeasured && row.timings.empty();
      NOSTRUM_CHECK((to_measure && row.chosen.empty()) || find_conv_candidate(row.chosen),
                    ShapeError, "unknown conv kernel '" + row.chosen + "'", what);
      if (r.contains("round_trip_ns")) {  // absent from tables written before it was probed
        const Json& trip = r.at("round_trip_ns");
        row.round_trip_ns[0] = trip.at(0).get<double>();
        row.round_trip_ns[1] = trip.at(1).get<double>();
      }
      table.rows.push_back(row);
    }
  } catch (const nlohmann::json::exception& e) {
    throw ShapeError(std::string("malformed conv kernel table: ") + e.what(), what);
  } catch (const OptionError& e) {
    throw ShapeError(std::string("malformed conv kernel table: ") + e.what(), what);
  }
  return table;
}

}  // namespace nostrum::kernels
