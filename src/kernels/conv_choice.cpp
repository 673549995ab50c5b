// The measured choice of a convolution kernel: timing the eligible candidates of one pass, the
// chooser, and the table's text and JSON forms (conv_choice.hpp).
#include "nostrum/kernels/conv_choice.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::kernels {

using Json = nlohmann::ordered_json;

bool same_shape(const ConvPassShape& a, const ConvPassShape& b) {
  const ConvGeometry &x = a.g, &y = b.g;
  return a.pass == b.pass && x.N == y.N && x.H == y.H && x.W == y.W && x.C == y.C && x.K == y.K &&
         x.R == y.R && x.S == y.S && x.stride == y.stride && x.pad == y.pad;
}

std::string conv_shape_name(const ConvGeometry& g) {
  char text[128];
  std::snprintf(text, sizeof text, "N%d H%d W%d C%d K%d R%d S%d /%d p%d", g.N, g.H, g.W, g.C, g.K,
                g.R, g.S, g.stride, g.pad);
  return text;
}

const char* conv_choice_source_name(ConvChoiceSource source) {
  switch (source) {
    case ConvChoiceSource::kMeasured:
      return "measured";
    case ConvChoiceSource::kCached:
      return "cached";
    case ConvChoiceSource::kForced:
      return "forced";
    case ConvChoiceSource::kFixedRule:
      return "fixed";
  }
  return "?";
}

const ConvChoice* ConvChoiceTable::find(const ConvPassShape& shape) const {
  for (const ConvChoice& row : rows)
    if (same_shape(row.shape, shape)) return &row;
  return nullptr;
}

size_t fastest_timing(const std::vector<ConvTiming>& timings) {
  NOSTRUM_CHECK(!timings.empty(), ShapeError, "no candidate was timed", "conv kernel choice");
  size_t best = 0;
  for (size_t i = 1; i < timings.size(); ++i)
    if (timings[i].seconds < timings[best].seconds) best = i;
  return best;
}

namespace {

void fill_random(std::vector<float>& v, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : v) x = u(rng);
}

}  // namespace

std::vector<ConvTiming> measure_conv_pass(const ConvPassShape& shape, Precision precision,
                                          const ConvMeasureOptions& options) {
  const ConvGeometry& g = shape.g;
  const size_t in_floats = size_t(g.N) * g.H * g.W * g.C;
  const size_t out_floats = size_t(g.N) * g.P() * g.Q() * g.K;
  const size_t weight_floats = size_t(g.K) * g.C * g.R * g.S;
  std::mt19937 rng(12345);
  // What the pass reads, from a fixed seed; what it writes.
  std::vector<float> input(shape.pass == ConvPass::kBackwardData ? out_floats : in_floats);
  std::vector<float> second(shape.pass == ConvPass::kBackwardWeights ? out_floats : weight_floats);
  fill_random(input, rng);
  fill_random(second, rng);
  std::vector<float> result(shape.pass == ConvPass::kForward        ? out_floats
                            : shape.pass == ConvPass::kBackwardData ? in_floats
                                                                    : weight_floats);
  ConvCall call;
  call.N = g.N;
  switch (shape.pass) {
    case ConvPass::kForward:
      call.in = input.data(), call.weight = second.data(), call.out = result.data();
      break;
    case ConvPass::kBackwardData:
      call.d_out = input.data(), call.weight = second.data(), call.d_in = result.data();
      break;
    case ConvPass::kBackwardWeights:
      call.in = input.data(), call.d_out = second.data(), call.d_weight = result.data();
      break;
  }

  std::vector<ConvTiming> timings;
  double best = 0;
  for (const ConvCandidate* c : conv_candidates()) {
    if (!conv_candidate_eligible(*c, g, shape.pass, precision)) continue;
    std::unique_ptr<PreparedConv> kernel = c->prepare(g, shape.pass, precision);
    Arena scratch(std::max<size_t>(kernel->scratch_floats(), 1), "conv measurement scratch");
    call.scratch = scratch.data();
    // Warm-up (first touch, per-thread buffers, caches); a candidate whose warm-up alone takes
    // twice the cut-off of the best so far is not timed further (its warm-up is its time).
    const double w0 = omp_get_wtime();
    kernel->run(call);
    const double warm_up = omp_get_wtime() - w0;
    std::vector<double> seconds;
    const int calls = std::max(1, options.calls);
    if (!timings.empty() && warm_up > 2 * options.cutoff * best) {
      seconds.push_back(warm_up);
    } else {
      int slower = 0;  // timed calls slower than the best median so far
      for (int i = 0; i < calls; ++i) {
        const double t0 = omp_get_wtime();
        kernel->run(call);
        seconds.push_back(omp_get_wtime() - t0);
        if (timings.empty()) continue;
        slower += seconds.back() > best;
        // Clearly slower at once; or more than half the calls slower than the best median, so
        // its median is too: it cannot win, whatever the calls left would give.
        if ((i == 0 && seconds[0] > options.cutoff * best) || 2 * slower > calls) break;
      }
    }
    std::sort(seconds.begin(), seconds.end());
    ConvTiming t{c->name(), seconds[seconds.size() / 2], int(seconds.size())};
    best = timings.empty() ? t.seconds : std::min(best, t.seconds);
    timings.push_back(t);
  }
  return timings;
}

std::vector<std::string> describe_conv_choices(const ConvChoiceTable& table) {
  std::vector<std::string> lines;
  for (const ConvChoice& row : table.rows) {
    std::string line = conv_shape_name(row.shape.g) + " " + conv_pass_name(row.shape.pass) + ":";
    for (const ConvTiming& t : row.timings) {
      char text[96];
      std::snprintf(text, sizeof text, " %s %.3f ms%s", t.candidate.c_str(), t.seconds * 1e3,
                    t.calls < ConvMeasureOptions{}.calls ? "*" : "");
      line += text;
    }
    line += " -> " + row.chosen + " (" + conv_choice_source_name(row.source) + ")";
    lines.push_back(line);
  }
  return lines;
}

namespace {

Json geometry_json(const ConvGeometry& g) {
  return Json{{"N", g.N}, {"H", g.H}, {"W", g.W},           {"C", g.C},    {"K", g.K},
              {"R", g.R}, {"S", g.S}, {"stride", g.stride}, {"pad", g.pad}};
}

ConvPass pass_from_name(const std::string& name, const std::string& what) {
  for (ConvPass p : kConvPasses)
    if (name == conv_pass_name(p)) return p;
  throw ShapeError("unknown conv pass '" + name + "'", what);
}

ConvChoiceSource source_from_name(const std::string& name, const std::string& what) {
  for (ConvChoiceSource s : {ConvChoiceSource::kMeasured, ConvChoiceSource::kCached,
                             ConvChoiceSource::kForced, ConvChoiceSource::kFixedRule})
    if (name == conv_choice_source_name(s)) return s;
  throw ShapeError("unknown conv choice source '" + name + "'", what);
}

}  // namespace

std::string conv_choices_to_json(const ConvChoiceTable& table) {
  Json rows = Json::array();
  for (const ConvChoice& row : table.rows) {
    Json timings = Json::array();
    for (const ConvTiming& t : row.timings)
      timings.push_back(
          Json{{"candidate", t.candidate}, {"seconds", t.seconds}, {"calls", t.calls}});
    rows.push_back(Json{{"shape", geometry_json(row.shape.g)},
                        {"pass", conv_pass_name(row.shape.pass)},
                        {"timings", timings},
                        {"chosen", row.chosen},
                        {"source", conv_choice_source_name(row.source)}});
  }
  const Json j{{"precision", precision_name(table.precision)},
               {"threads", table.threads},
               {"measure_seconds", table.measure_seconds},
               {"rows", rows}};
  return j.dump();
}

ConvChoiceTable conv_choices_from_json(const std::string& text, const std::string& what) {
  ConvChoiceTable table;
  try {
    const Json j = Json::parse(text);
    table.precision = parse_precision(j.at("precision").get<std::string>());
    table.threads = j.at("threads").get<int>();
    table.measure_seconds = j.at("measure_seconds").get<double>();
    for (const Json& r : j.at("rows")) {
      ConvChoice row;
      const Json& s = r.at("shape");
      ConvGeometry& g = row.shape.g;
      g.N = s.at("N"), g.H = s.at("H"), g.W = s.at("W"), g.C = s.at("C"), g.K = s.at("K");
      g.R = s.at("R"), g.S = s.at("S"), g.stride = s.at("stride"), g.pad = s.at("pad");
      row.shape.pass = pass_from_name(r.at("pass").get<std::string>(), what);
      for (const Json& t : r.at("timings"))
        row.timings.push_back(ConvTiming{t.at("candidate").get<std::string>(),
                                         t.at("seconds").get<double>(), t.at("calls").get<int>()});
      row.chosen = r.at("chosen").get<std::string>();
      NOSTRUM_CHECK(find_conv_candidate(row.chosen) != nullptr, ShapeError,
                    "unknown conv kernel '" + row.chosen + "'", what);
      row.source = source_from_name(r.at("source").get<std::string>(), what);
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
