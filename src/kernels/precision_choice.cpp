// `--precision auto`: runs the bf16 (vdpbf16ps, AMX tiles) and fp32 register probes and applies
// the 1.3x rule (precision_choice.hpp).
#include "nostrum/kernels/precision_choice.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "amx_probe.hpp"
#include "fma_probe_avx2.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"

namespace nostrum::kernels {

namespace {

constexpr int64_t kProbeIterations = 1 << 20;  // ~25 M vector instructions: 10-50 ms
constexpr int kProbeRepeats = 3;

// flops of one probe iteration: 24 chains x lanes x (2 for an FMA, 4 for a bf16 pair dot).
constexpr double kAvx512FmaFlops = 24.0 * 16 * 2;
constexpr double kAvx2FmaFlops = 24.0 * 8 * 2;
constexpr double kBf16DotFlops = 24.0 * 16 * 4;

}  // namespace

const char* fp32_fma_probe_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512()) return "avx512";
  if (f.avx2 && f.fma) return "avx2";
  return "none";
}

double fp32_fma_probe_gflops(int64_t iterations) {
  const std::string isa = fp32_fma_probe_isa();
  if (isa == "avx512") {
    note_dispatch(DispatchSite::kFmaProbe, Isa::kAvx512);
    return kAvx512FmaFlops * double(iterations) / fp32_fma_probe_seconds(iterations) * 1e-9;
  }
  if (isa == "avx2") {
    note_dispatch(DispatchSite::kFmaProbe, Isa::kAvx2);
    return kAvx2FmaFlops * double(iterations) / avx2::fma_probe_seconds(iterations) * 1e-9;
  }
  return 0;
}

bool amx_tile_probe_available() {
  return cpu_features().amx_tiles();
}

double amx_tile_probe_gflops(int64_t iterations) {
  NOSTRUM_CHECK(amx_tile_probe_available(), OptionError,
                "the AMX tile probe needs AMX_TILE, AMX_BF16 and Linux's tile-data permission",
                "amx_tile_probe");
  const auto t0 = std::chrono::steady_clock::now();
  const float sum = amx::tile_probe(iterations);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The tiles' sums are exact (amx_probe.hpp): anything else means the tile configuration or the
  // operands were not what the probe counts, and its rate would be a made-up number.
  const double expected = amx::kProbeAccumulators * 0.25 * double(iterations);
  NOSTRUM_CHECK(double(sum) == expected, Error,
                "the AMX tile probe summed " + std::to_string(sum) + " instead of " +
                    std::to_string(expected),
                "amx_tile_probe");
  return amx::kProbeAccumulators * amx::kFlopsPerTileStep * double(iterations) / seconds * 1e-9;
}

double bf16_dot_probe_gflops(int64_t iterations) {
  return kBf16DotFlops * double(iterations) / bf16_dot_probe_seconds(iterations) * 1e-9;
}

namespace {

double best_of_repeats(double (*probe)(int64_t), int64_t iterations = kProbeIterations) {
  double best = 0;
  for (int r = 0; r < kProbeRepeats; ++r) best = std::max(best, probe(iterations));
  return best;
}

// A tile step is 128 times a vdpbf16ps zmm's work: 2^17 steps take about as long as the others.
constexpr int64_t kAmxProbeIterations = 1 << 17;

}  // namespace

CeilingProbes measure_ceiling_probes(const std::string& amx_obstacle) {
  CeilingProbes p;
  const CpuFeatures& f = cpu_features();
  if (f.architecture != "x86_64") {  // the probes and the bf16 GEMM are x86 code
    p.fp32_isa = "none";
    p.no_bf16_path = f.architecture;
    return p;
  }
  p.fp32_isa = fp32_fma_probe_isa();
  p.fp32_gflops = best_of_repeats(fp32_fma_probe_gflops);
  if (f.avx512_bf16)
    p.bf16_gflops = best_of_repeats(bf16_dot_probe_gflops);
  else
    p.bf16_missing = f.avx512() ? "AVX512_BF16" : "AVX512F/AVX512BW";
  if (!(f.amx_tile && f.amx_bf16))
    p.amx_missing = "AMX_TILE/AMX_BF16";
  else if (!f.amx_permitted)
    p.amx_missing = "Linux's AMX tile-data permission";
  else if (!amx_obstacle.empty())
    p.amx_not_reached = amx_obstacle;
  else
    p.amx_gflops = best_of_repeats(amx_tile_probe_gflops, kAmxProbeIterations);
  return p;
}

std::optional<double> best_bf16_gflops(const CeilingProbes& probes) {
  if (probes.bf16_gflops && probes.amx_gflops)
    return std::max(*probes.bf16_gflops, *probes.amx_gflops);
  return probes.bf16_gflops ? probes.bf16_gflops : probes.amx_gflops;
}

PrecisionChoice choose_precision(const CeilingProbes& probes, double min_speedup) {
  PrecisionChoice c;
  c.probes = probes;
  char text[256];
  if (!probes.no_bf16_path.empty()) {
    c.precision = Precision::kFp32;
    std::snprintf(text, sizeof text,
                  "nostrum has no bf16 path on %s (its bf16 GEMM is x86-64 AVX512_BF16 code)",
                  probes.no_bf16_path.c_str());
  } else if (!probes.bf16_gflops) {
    // AMX without AVX512_BF16 exists on no CPU; nostrum's bf16 path needs AVX512_BF16 anyway.
    c.precision = Precision::kFp32;
    std::snprintf(text, sizeof text, "the CPU lacks %s", probes.bf16_missing.c_str());
  } else {
    const bool amx = probes.amx_gflops && *probes.amx_gflops > *probes.bf16_gflops;
    const double ratio = *best_bf16_gflops(probes) / probes.fp32_gflops;
    const bool bf16 = ratio >= min_speedup;
    c.precision = bf16 ? Precision::kBf16 : Precision::kFp32;
    std::snprintf(text, sizeof text, "the %s probe is %.2fx the fp32 probe, %s %.2fx",
                  amx ? "AMX tile" : "bf16", ratio, bf16 ? "at least" : "below", min_speedup);
  }
  c.reason = text;
  return c;
}

std::string describe(const PrecisionChoice& c) {
  if (!c.probes.no_bf16_path.empty())
    return std::string("precision auto -> ") + precision_name(c.precision) + ": " + c.reason +
           " (no probes run)";
  char bf16[64];
  if (c.probes.bf16_gflops)
    std::snprintf(bf16, sizeof bf16, "%.1f GFLOP/s", *c.probes.bf16_gflops);
  else
    std::snprintf(bf16, sizeof bf16, "unavailable");
  char amx[160];
  if (c.probes.amx_gflops)
    std::snprintf(amx, sizeof amx, "%.1f GFLOP/s", *c.probes.amx_gflops);
  else if (!c.probes.amx_not_reached.empty())
    std::snprintf(amx, sizeof amx, "not run (%s)", c.probes.amx_not_reached.c_str());
  else if (!c.probes.amx_missing.empty())
    std::snprintf(amx, sizeof amx, "unavailable (no %s)", c.probes.amx_missing.c_str());
  else
    std::snprintf(amx, sizeof amx, "unavailable");
  char text[640];
  std::snprintf(text, sizeof text,
                "precision auto -> %s: %s (1 thread: fp32 FMA probe %.1f GFLOP/s (%s), bf16 "
                "vdpbf16ps probe %s, AMX tile probe %s)",
                precision_name(c.precision), c.reason.c_str(), c.probes.fp32_gflops,
                c.probes.fp32_isa.c_str(), bf16, amx);
  return text;
}

Precision precision_from_option(const std::string& value, const std::string& option,
                                std::string* auto_note, const std::string& amx_obstacle) {
  if (value == "auto") {
    const PrecisionChoice choice = choose_precision(measure_ceiling_probes(amx_obstacle));
    if (auto_note) *auto_note = describe(choice);
    return choice.precision;
  }
  if (value == "fp32" || value == "bf16") return parse_precision(value);
  throw OptionError("unknown precision '" + value + "'", option, "use fp32, bf16 or auto");
}

}  // namespace nostrum::kernels
