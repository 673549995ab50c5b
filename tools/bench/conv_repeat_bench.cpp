// nostrum-conv-repeat-bench: ResNet-50's (or resnet8's) convolution passes measured again and again
// in one process by the measured choice's own schedule (kernels/conv_choice.hpp), each repeat on
// every one of a few operand sets of their own memory: how far the candidates' times, and the ratio
// of the fastest to the second, move when nothing but time and the operands' pages changes. Where
// they move by more than two candidates differ, no measurement can say which of the two is faster
// for good (src/kernels/conv_selection.md, Measuring). bf16 passes take their operands in bf16 and
// a forward writes bf16, as a bf16 run hands most layers theirs.
//
// Usage: nostrum-conv-repeat-bench [--model resnet50|resnet8] [--image 224|28] [--batch 32]
//          [--precision bf16|fp32] [--only TEXT] [--pass forward|backward_data|backward_weights]
//          [--repeats 5] [--sets 2]
// (--only: the convs whose name, as nostrum-conv-bench prints it, contains TEXT).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model_convs.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/pool_round_trip.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_choice.hpp"

using namespace nostrum;
using kernels::ConvPass;

namespace {

int usage(const std::string& why) {
  std::fprintf(stderr,
               "nostrum-conv-repeat-bench: %s\nusage: nostrum-conv-repeat-bench [--model "
               "resnet50|resnet8] [--image 224|28] [--batch 32] [--precision bf16|fp32] [--only "
               "TEXT] [--pass forward|backward_data|"
               "backward_weights] [--repeats 5] [--sets 2]\n",
               why.c_str());
  return 2;
}

bool parse_positive(const char* text, int* value) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 1 << 16) return false;
  *value = int(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int image = 0, batch = 32, repeats = 5, sets = 2;  // image 0: the model's (224, 28)
  std::string model = "resnet50";
  std::string precision_name = kernels::bf16_available() ? "bf16" : "fp32", only, pass_name;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage("option " + arg + " is unknown or has no value");
    const char* value = argv[++i];
    if (arg == "--model") {
      model = value;
      if (!bench::is_bench_model(model))
        return usage("--model takes resnet50 or resnet8, not '" + model + "'");
    } else if (arg == "--image") {
      if (!parse_positive(value, &image)) return usage("--image takes a side in pixels");
    } else if (arg == "--batch") {
      if (!parse_positive(value, &batch)) return usage("--batch takes N >= 1");
    } else if (arg == "--repeats") {
      if (!parse_positive(value, &repeats)) return usage("--repeats takes N >= 1");
    } else if (arg == "--sets") {
      if (!parse_positive(value, &sets)) return usage("--sets takes N >= 1");
    } else if (arg == "--precision") {
      precision_name = value;
      if (precision_name != "bf16" && precision_name != "fp32")
        return usage("--precision takes bf16 or fp32, not '" + precision_name + "'");
    } else if (arg == "--only") {
      only = value;
    } else if (arg == "--pass") {
      pass_name = value;
      const auto& names = kernels::conv_pass_names();
      if (std::find(names.begin(), names.end(), pass_name) == names.end())
        return usage("--pass takes forward, backward_data or backward_weights, not '" + pass_name +
                     "'");
    } else {
      return usage("option " + arg + " is unknown");
    }
  }
  const kernels::Precision precision =
      precision_name == "bf16" ? kernels::Precision::kBf16 : kernels::Precision::kFp32;
  if (precision == kernels::Precision::kBf16 && !kernels::bf16_available())
    return usage("--precision bf16: this CPU has no AVX512_BF16");
  image = bench::bench_model_image(model, image);
  const char* model_title = model == "resnet50" ? "ResNet-50" : "resnet8";
  std::printf("cpu: %s; %d threads; %s; %s %dx%d b%d\n", cpu_features().describe().c_str(),
              omp_get_max_threads(), precision_name.c_str(), model_title, image, image, batch);
  pool_round_trip_ns(16);  // not kept: the pool's threads just made may share one CPU at first
  // Each set: operands and scratch in memory of its own, all alive at once (other pages).
  std::vector<std::unique_ptr<kernels::ConvMeasureBuffers>> buffers;
  for (int s = 0; s < sets; ++s) buffers.emplace_back(new kernels::ConvMeasureBuffers());
  int listed = 0;
  for (const bench::NamedConv& conv : bench::bench_model_convs(model, image, batch)) {
    if (!only.empty() && conv.name.find(only) == std::string::npos) continue;
    for (ConvPass pass :
         {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
      if (!pass_name.empty() && pass_name != kernels::conv_pass_name(pass)) continue;
      kernels::ConvPassShape shape;
      shape.g = conv.geometry;
      shape.pass = pass;
      const bool bf16 = precision == kernels::Precision::kBf16;
      shape.bf16_in = shape.bf16_d_out = bf16;
      shape.bf16_out = bf16 && pass == ConvPass::kForward;
      std::printf("%s %s (%s)\n", conv.name.c_str(), kernels::conv_pass_name(pass),
                  kernels::conv_shape_name(conv.geometry).c_str());
      double low = 1e300, high = 0;  // the fastest / the second, over all measurements
      std::vector<std::string> leaders;
      for (int r = 0; r < repeats; ++r)
        for (int s = 0; s < sets; ++s) {
          const double trip = pool_round_trip_ns();
          const std::vector<kernels::ConvTiming> timings =
              kernels::measure_conv_pass(shape, precision, {}, buffers[size_t(s)].get());
          // Every candidate that ran (* cut short: it could not win), fastest first for the ratio.
          int most = 0;
          for (const auto& t : timings) most = std::max(most, t.calls);
          std::vector<const kernels::ConvTiming*> ran;
          std::printf("  repeat %d set %d:", r + 1, s + 1);
          for (const auto& t : timings)
            if (t.calls > 0) {
              ran.push_back(&t);
              std::printf(" %s %.3f%s", t.candidate.c_str(), t.seconds * 1e3,
                          t.calls < most ? "*" : "");
            }
          std::sort(ran.begin(), ran.end(),
                    [](auto* a, auto* b) { return a->seconds < b->seconds; });
          leaders.push_back(ran[0]->candidate);
          if (ran.size() > 1) {
            const double ratio = ran[1]->seconds / ran[0]->seconds;
            low = std::min(low, ratio), high = std::max(high, ratio);
            std::printf(" ms; second / fastest %.3f", ratio);
          } else {
            std::printf(" ms");
          }
          std::printf("; round trip %.0f ns\n", trip);
        }
      int changes = 0;
      for (size_t i = 1; i < leaders.size(); ++i) changes += leaders[i] != leaders[i - 1];
      if (high > 0)
        std::printf("  second / fastest %.3f-%.3f; the fastest changed %d times in %zu\n", low,
                    high, changes, leaders.size());
      ++listed;
    }
  }
  if (listed == 0)
    return usage(std::string("no ") + model_title + " conv's name contains '" + only + "'");
  return 0;
}
