// `--precision auto`: the register ceilings of bf16 (vdpbf16ps, and AMX tiles where Linux grants
// them) and fp32 (FMA) measured on this CPU, and the rule that picks bf16 only where its best
// ceiling is at least 1.3x fp32's. A pure function of the measured numbers (choose_precision) so
// the rule is tested apart from the probes. On aarch64 there is no bf16 path (nor a measured one)
// yet: `auto` is fp32 there, without probes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nostrum/kernels/precision.hpp"

namespace nostrum::kernels {

// One thread's register-ceiling probes, in GFLOP/s (best of a few short runs).
struct CeilingProbes {
  double fp32_gflops = 0;             // FMA chains on the widest vectors the CPU has
  std::string fp32_isa;               // "avx512" or "avx2" ("none": no probe ran)
  std::optional<double> bf16_gflops;  // vdpbf16ps chains; empty where the CPU lacks AVX512_BF16
  std::string bf16_missing;           // why bf16_gflops is empty (the missing CPU feature)
  // tdpbf16ps on AMX tiles: the rate oneDNN's bf16 primitives reach on Sapphire Rapids and later
  // (on those cores vdpbf16ps runs at half the FMA rate, so its probe alone would say fp32).
  // Empty where the CPU lacks AMX_TILE/AMX_BF16, Linux refused the tile data, or the cap is lower.
  std::optional<double> amx_gflops;
  std::string amx_missing;  // why amx_gflops is empty: the missing CPU feature or permission
  // Or: the tiles are there but the run's conv kernels would not use them (conv_selection.hpp's
  // conv_request_amx_obstacle, e.g. "--conv-kernel fixed runs no kernel on AMX tiles"); the
  // probe then does not run, and bf16 is judged by vdpbf16ps alone.
  std::string amx_not_reached;
  // The target architecture where this build has no bf16 path at all ("aarch64"; "" on x86-64):
  // no probe runs and the choice is fp32.
  std::string no_bf16_path;
};

struct PrecisionChoice {
  Precision precision = Precision::kFp32;
  CeilingProbes probes;
  std::string reason;  // one sentence: the ratio against the threshold, or the missing feature
};

// The bf16 ceiling the rule compares: the larger of the two bf16 probes (empty when neither ran).
std::optional<double> best_bf16_gflops(const CeilingProbes& probes);

// bf16 needs this ratio of its probe to fp32's before `auto` takes it: the bf16 step also pays
// conversion and packing, and its memory-bound layers do not speed up at all.
inline constexpr double kAutoBf16MinSpeedup = 1.3;

// One run of each register probe on the calling thread, in GFLOP/s. The fp32 one uses zmm FMAs
// where the CPU has AVX-512, ymm FMAs where it has AVX2 (fp32_fma_probe_isa() says which; 0 below
// AVX2); the bf16 one requires bf16_available().
double fp32_fma_probe_gflops(int64_t iterations);
double bf16_dot_probe_gflops(int64_t iterations);
const char* fp32_fma_probe_isa();
// One run of the AMX tile probe (4 accumulator tiles, 16 x 16 x 32 bf16 each a step) on the
// calling thread, in GFLOP/s; requires amx_tile_probe_available().
bool amx_tile_probe_available();
double amx_tile_probe_gflops(int64_t iterations);

// Runs the probes on the calling thread (about 0.1 s). NOSTRUM_CPU_NO_BF16=1 hides bf16 as in
// every other bf16 path. A non-empty amx_obstacle (why the run's conv kernels cannot reach the
// tiles) leaves the AMX probe out, recorded in amx_not_reached.
CeilingProbes measure_ceiling_probes(const std::string& amx_obstacle = "");

// The rule: bf16 where best_bf16_gflops >= min_speedup * fp32_gflops, fp32 otherwise.
PrecisionChoice choose_precision(const CeilingProbes& probes,
                                 double min_speedup = kAutoBf16MinSpeedup);

// "precision auto -> bf16: the AMX tile probe is 18.2x the fp32 probe, at least 1.30x (1 thread:
// fp32 FMA probe 159.8 GFLOP/s (avx512), bf16 vdpbf16ps probe 80.8 GFLOP/s, AMX tile probe 2906.1
// GFLOP/s)" — the line nostrum-train and nostrum-bench print.
std::string describe(const PrecisionChoice& choice);

// The value of a `--precision` option: "fp32" and "bf16" as parse_precision takes them, "auto" by
// measure_ceiling_probes(amx_obstacle) + choose_precision, whose describe() line goes to
// *auto_note. Anything else throws OptionError naming `option`. Programs that run convolutions
// pass conv_request_amx_obstacle of their --conv-kernel request.
Precision precision_from_option(const std::string& value, const std::string& option,
                                std::string* auto_note, const std::string& amx_obstacle = "");

}  // namespace nostrum::kernels
