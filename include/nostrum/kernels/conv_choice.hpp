// The measured choice of a convolution kernel per layer shape and pass: every eligible candidate
// (kernels/conv_candidate.hpp) timed at the run's batch, threads and precision (the median of a
// few calls), the fastest kept; the table of it (printed with --verbose, written to result.json and
// to the cache, kernels/conv_cache.hpp). The chooser is a pure function of the times.
#pragma once

#include <string>
#include <vector>

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::kernels {

// One pass of one layer shape (g.N: the batch it runs at).
struct ConvPassShape {
  ConvGeometry g;
  ConvPass pass = ConvPass::kForward;
};
bool same_shape(const ConvPassShape& a, const ConvPassShape& b);

// "N32 H56 W56 C64 K64 R3 S3 /1 p1": the geometry as the table, the cache and result.json write it.
std::string conv_shape_name(const ConvGeometry& g);

struct ConvTiming {
  std::string candidate;
  double seconds = 0;  // the median of the timed calls
  int calls = 0;       // timed calls; fewer than asked: cut short, it could not win (see below)
};

// How a row's choice was made.
enum class ConvChoiceSource { kMeasured, kCached, kForced, kFixedRule };
const char* conv_choice_source_name(ConvChoiceSource source);  // measured cached forced fixed

struct ConvChoice {
  ConvPassShape shape;
  std::vector<ConvTiming> timings;  // measured or cached; empty when forced or by the fixed rule
  std::string chosen;               // a candidate's name
  ConvChoiceSource source = ConvChoiceSource::kFixedRule;
};

struct ConvChoiceTable {
  Precision precision = Precision::kFp32;
  int threads = 1;
  std::vector<ConvChoice> rows;
  double measure_seconds = 0;  // wall time spent measuring (0 when everything came from a cache)
  const ConvChoice* find(const ConvPassShape& shape) const;  // nullptr when absent
};

// The chooser: the index of the smallest time; on a tie the earliest (the registry's order, which
// measure_conv_pass keeps). Throws ShapeError for an empty list.
size_t fastest_timing(const std::vector<ConvTiming>& timings);

struct ConvMeasureOptions {
  int calls = 3;  // timed calls per candidate after one warm-up call (the median is kept)
  // A candidate is cut short once it cannot win against the best median so far: its warm-up took
  // more than 2 x cutoff times that (its warm-up is then its time), its first timed call more than
  // cutoff times, or more than half its calls were slower (its median would be too). Its time is
  // then the median of the calls it made, above the best, so it is not chosen. The last rule is
  // exact (its full median would lose too); the first two take one call that slow as proof.
  double cutoff = 1.5;
};

// Times every eligible candidate for this pass, in registry order, on the calling thread's
// OpenMP pool (outside any parallel region), on inputs from a fixed seed.
std::vector<ConvTiming> measure_conv_pass(const ConvPassShape& shape, Precision precision,
                                          const ConvMeasureOptions& options = {});

// The rows of a table as one line each: shape, pass, every candidate's time in ms, the chosen one
// and how it was chosen (what --verbose prints).
std::vector<std::string> describe_conv_choices(const ConvChoiceTable& table);

// The table as JSON text (for the broadcast from rank 0, result.json and the cache) and back;
// conv_choices_from_json throws ShapeError naming `what` on malformed text or unknown names.
std::string conv_choices_to_json(const ConvChoiceTable& table);
ConvChoiceTable conv_choices_from_json(const std::string& text, const std::string& what);

}  // namespace nostrum::kernels
