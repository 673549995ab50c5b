// `--conv-kernel`: the request parsed, and the table made by measuring, from the cache, by the
// fixed rule or forced (conv_selection.hpp).
#include "nostrum/kernels/conv_selection.hpp"

#include <omp.h>

#include <algorithm>

#include "nostrum/core/error.hpp"
#include "nostrum/core/pool_round_trip.hpp"
#include "nostrum/kernels/conv_cache.hpp"

namespace nostrum::kernels {

ConvKernelRequest conv_kernel_request(const std::string& value, const std::string& cache,
                                      const std::string& option) {
  ConvKernelRequest r;
  if (value == "measure") {
    r.mode = ConvKernelMode::kMeasure;
  } else if (value == "cached") {
    r.mode = ConvKernelMode::kCached;
  } else if (value == "fixed") {
    r.mode = ConvKernelMode::kFixedRule;
  } else if (find_conv_candidate(value)) {
    r.mode = ConvKernelMode::kForced;
    r.forced = value;
  } else {
    std::string names;
    for (const ConvCandidate* c : conv_candidates()) names += std::string(", ") + c->name();
    throw OptionError("unknown conv kernel '" + value + "'", option,
                      "use measure, cached, fixed" + names);
  }
  r.cache = cache.empty() ? default_conv_cache_path() : cache == "none" ? std::string() : cache;
  return r;
}

std::string conv_request_amx_obstacle(const ConvKernelRequest& request) {
  const CpuFeatures& cpu = cpu_features();
  const auto reaches = [&](const ConvCandidate& c) {
    return c.available(cpu) && c.reaches_amx(cpu);
  };
  switch (request.mode) {
    case ConvKernelMode::kFixedRule:
      return "--conv-kernel fixed runs no kernel on AMX tiles";
    case ConvKernelMode::kForced: {
      const ConvCandidate* forced = find_conv_candidate(request.forced);
      if (forced && reaches(*forced)) return "";
      return "--conv-kernel " + request.forced + " does not run on AMX tiles";
    }
    case ConvKernelMode::kMeasure:
    case ConvKernelMode::kCached:
      for (const ConvCandidate* c : conv_candidates())
        if (reaches(*c)) return "";
      return "no conv kernel built in runs on AMX tiles";
  }
  return "";
}

std::string conv_kernel_value(const ConvKernelRequest& request) {
  switch (request.mode) {
    case ConvKernelMode::kMeasure:
      return "measure";
    case ConvKernelMode::kCached:
      return "cached";
    case ConvKernelMode::kFixedRule:
      return "fixed";
    case ConvKernelMode::kForced:
      return request.forced;
  }
  return "?";
}

std::string conv_kernel_help() {
  std::string text;
  for (const ConvCandidate* c : conv_candidates())
    text += std::string("  ") + c->name() + ": " + c->description() + "\n";
  return text;
}

namespace {

ConvChoice fixed_rule(const ConvPassShape& s, Precision precision, int threads) {
  ConvChoice row;
  row.shape = s;
  row.chosen = conv_fixed_rule_candidate(s.g, s.pass, precision, threads).name();
  row.source = ConvChoiceSource::kFixedRule;
  return row;
}

}  // namespace

ConvChoiceTable plan_conv_kernels(const std::vector<ConvPassShape>& shapes, Precision precision,
                                  int threads, const ConvKernelRequest& request,
                                  std::vector<std::string>* notes) {
  ConvChoiceTable table;
  table.precision = precision;
  table.threads = threads;
  const auto note = [&](const std::string& line) {
    if (notes) notes->push_back(line);
  };
  if (request.mode == ConvKernelMode::kFixedRule) {
    for (const ConvPassShape& s : shapes) table.rows.push_back(fixed_rule(s, precision, threads));
    return table;
  }
  if (request.mode == ConvKernelMode::kForced) {
    const ConvCandidate* c = find_conv_candidate(request.forced);
    NOSTRUM_CHECK(c != nullptr, OptionError, "unknown conv kernel '" + request.forced + "'",
                  "--conv-kernel");
    NOSTRUM_CHECK(c->available(cpu_features()), OptionError,
                  "conv kernel " + request.forced + " cannot run on this CPU (" +
                      cpu_features().describe() + ")",
                  "--conv-kernel", c->description());
    NOSTRUM_CHECK(conv_candidate_serves(*c, precision), OptionError,
                  "conv kernel " + request.forced + " does not run " + precision_name(precision),
                  "--conv-kernel", c->description());
    int unfit = 0;
    for (const ConvPassShape& s : shapes) {
      if (c->fits(s.g, s.pass)) {
        ConvChoice row;
        row.shape = s;
        row.chosen = c->name();
        row.source = ConvChoiceSource::kForced;
        table.rows.push_back(row);
      } else {
        table.rows.push_back(fixed_rule(s, precision, threads));
        ++unfit;
      }
    }
    if (unfit)
      note("--conv-kernel " + request.forced + " does not fit " + std::to_string(unfit) + " of " +
           std::to_string(shapes.size()) + " conv passes: they run the fixed rule's kernel");
    return table;
  }

  ConvCacheContents cache;
  if (request.mode == ConvKernelMode::kCached && !request.cache.empty()) {
    cache = read_conv_cache(request.cache);
    if (!cache.refused.empty()) note(cache.refused + "; measuring again");
  }
  for (const ConvPassShape& s : shapes) {
    if (const ConvChoice* hit = find_cached(cache, s, threads, precision)) {
      const ConvCandidate* c = find_conv_candidate(hit->chosen);
      if (c && conv_candidate_eligible(*c, s.g, s.pass, precision)) {
        ConvChoice row = *hit;
        row.source = ConvChoiceSource::kCached;
        table.rows.push_back(row);
        continue;
      }
      note("conv kernel cache " + request.cache + ": " + hit->chosen + " cannot run " +
           conv_shape_name(s.g) + " " + conv_pass_name(s.pass) + " here; measuring it again");
    }
    ConvChoice row;  // to be measured: no timings, no choice yet
    row.shape = s;
    row.source = ConvChoiceSource::kMeasured;
    table.rows.push_back(row);
  }
  return table;
}

int conv_rows_to_measure(const ConvChoiceTable& table) {
  int count = 0;
  for (const ConvChoice& row : table.rows)
    count += row.source == ConvChoiceSource::kMeasured && row.timings.empty();
  return count;
}

void measure_planned_conv_rows(ConvChoiceTable& table, const ConvMeasureOptions& options,
                               float* idle_memory, size_t idle_floats) {
  if (conv_rows_to_measure(table) == 0) return;
  const double t0 = omp_get_wtime();
  ConvMeasureBuffers buffers(idle_memory, idle_floats);  // one set for every pass measured here
  // A row's pass measured, again while the host state changed during it
  // (ConvMeasureOptions::state_retries). A few round trips first, not kept: a pool's threads
  // just made can share one CPU until the scheduler moves one, and read as a far state.
  if (options.round_trip_ns) pool_round_trip_ns(16);
  for (ConvChoice& row : table.rows) {
    if (row.source != ConvChoiceSource::kMeasured || !row.timings.empty()) continue;
    for (int attempt = 0;; ++attempt) {
      if (options.round_trip_ns) row.round_trip_ns[0] = options.round_trip_ns();
      row.timings = measure_conv_pass(row.shape, table.precision, options, &buffers);
      if (options.round_trip_ns) row.round_trip_ns[1] = options.round_trip_ns();
      if (attempt >= options.state_retries ||
          same_host_state(row.round_trip_ns[0], row.round_trip_ns[1]))
        break;
    }
    row.chosen = row.timings[fastest_timing(row.timings)].candidate;
  }
  table.measure_seconds = omp_get_wtime() - t0;
}

void keep_conv_choices(const ConvChoiceTable& table, const ConvKernelRequest& request,
                       std::vector<std::string>* notes) {
  const bool measured =
      std::any_of(table.rows.begin(), table.rows.end(),
                  [](const ConvChoice& row) { return row.source == ConvChoiceSource::kMeasured; });
  if (!measured || request.cache.empty()) return;
  try {
    // Read again just before writing: another run may have written it meanwhile.
    ConvCacheContents latest = read_conv_cache(request.cache);
    if (!latest.refused.empty()) latest = ConvCacheContents{};
    write_conv_cache(request.cache, latest, table, request.mode == ConvKernelMode::kMeasure);
  } catch (const Error& e) {
    if (notes) notes->push_back(std::string(e.what()) + " (the choice is used, not kept)");
  }
}

ConvChoiceTable select_conv_kernels(const std::vector<ConvPassShape>& shapes, Precision precision,
                                    int threads, const ConvKernelRequest& request,
                                    std::vector<std::string>* notes, float* idle_memory,
                                    size_t idle_floats) {
  ConvChoiceTable table = plan_conv_kernels(shapes, precision, threads, request, notes);
  measure_planned_conv_rows(table, request.measure, idle_memory, idle_floats);
  keep_conv_choices(table, request, notes);
  return table;
}

}  // namespace nostrum::kernels
