// `--precision auto`: the 1.3x rule on given probe numbers (boundary, missing bf16, AMX tiles), the
// printed line, and the live probes on this CPU against its /proc/cpuinfo flags (aarch64: fp32, no
// probes).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "isa_cap_env.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/precision_choice.hpp"

using namespace nostrum::kernels;
using nostrum::testing::cpuinfo_has;

namespace {

CeilingProbes probes(double fp32, double bf16) {
  CeilingProbes p;
  p.fp32_gflops = fp32;
  p.fp32_isa = "avx512";
  p.bf16_gflops = bf16;
  return p;
}

}  // namespace

TEST_CASE("precision auto takes bf16 only at 1.3x the fp32 probe or more") {
  CHECK(choose_precision(probes(100, 235)).precision == Precision::kBf16);     // Zen 4: 2.0x
  CHECK(choose_precision(probes(159.8, 80.8)).precision == Precision::kFp32);  // Intel: 0.5x
  CHECK(choose_precision(probes(100, 130)).precision == Precision::kBf16);     // at the threshold
  CHECK(choose_precision(probes(100, 129.9)).precision == Precision::kFp32);   // just below
  CHECK(choose_precision(probes(100, 150), 1.6).precision == Precision::kFp32);
}

TEST_CASE("precision auto counts the AMX tile probe as bf16's ceiling where it is the faster") {
  // Sapphire Rapids and later: vdpbf16ps at half the FMA rate, AMX tiles far above it.
  CeilingProbes p = probes(159.8, 80.8);
  p.amx_gflops = 2906.1;
  const PrecisionChoice c = choose_precision(p);
  CHECK(c.precision == Precision::kBf16);
  CHECK(*best_bf16_gflops(p) == 2906.1);
  const std::string line = describe(c);
  INFO(line);
  CHECK(line.find("the AMX tile probe is 18.19x the fp32 probe, at least 1.30x") !=
        std::string::npos);
  CHECK(line.find("bf16 vdpbf16ps probe 80.8 GFLOP/s, AMX tile probe 2906.1 GFLOP/s") !=
        std::string::npos);
  // A tile rate below the threshold does not make bf16 (nor does it where vdpbf16ps is faster).
  p.amx_gflops = 150;
  CHECK(choose_precision(p).precision == Precision::kFp32);
  CHECK(choose_precision(p).reason.find("the AMX tile probe is 0.94x") != std::string::npos);
  p.bf16_gflops = 235;
  p.fp32_gflops = 100;
  CHECK(*best_bf16_gflops(p) == 235);
  CHECK(choose_precision(p).reason.find("the bf16 probe is 2.35x") != std::string::npos);
  // Without AVX512_BF16 nostrum has no bf16 path, whatever the tiles say.
  p.bf16_gflops.reset();
  p.bf16_missing = "AVX512_BF16";
  p.amx_gflops = 2906.1;
  CHECK(choose_precision(p).precision == Precision::kFp32);
}

TEST_CASE("precision auto without AVX512_BF16 is fp32 and says which feature is missing") {
  CeilingProbes p;
  p.fp32_gflops = 95;
  p.fp32_isa = "avx2";
  p.bf16_missing = "AVX512F/AVX512BW";
  const PrecisionChoice c = choose_precision(p);
  CHECK(c.precision == Precision::kFp32);
  const std::string line = describe(c);
  CHECK(line.find("precision auto -> fp32") != std::string::npos);
  CHECK(line.find("lacks AVX512F/AVX512BW") != std::string::npos);
  CHECK(line.find("fp32 FMA probe 95.0 GFLOP/s (avx2)") != std::string::npos);
  CHECK(line.find("bf16 vdpbf16ps probe unavailable, AMX tile probe unavailable") !=
        std::string::npos);
}

TEST_CASE("precision auto prints both probe numbers and the ratio") {
  const std::string line = describe(choose_precision(probes(117, 235)));
  CHECK(line.find("precision auto -> bf16") != std::string::npos);
  CHECK(line.find("2.01x the fp32 probe, at least 1.30x") != std::string::npos);
  CHECK(line.find("fp32 FMA probe 117.0 GFLOP/s") != std::string::npos);
  CHECK(line.find("bf16 vdpbf16ps probe 235.0 GFLOP/s") != std::string::npos);
}

#if defined(__x86_64__)
TEST_CASE("the live probes match this CPU's flags and the choice follows the rule") {
  const CeilingProbes p = measure_ceiling_probes();
  INFO(describe(choose_precision(p)));
  const bool hidden = std::getenv("NOSTRUM_CPU_NO_BF16") != nullptr;
  // NOSTRUM_MAX_ISA lowers what the probes may use (CTest runs this once more under avx2).
  const bool avx512 = cpuinfo_has("avx512f") && nostrum::testing::cap_allows(nostrum::Isa::kAvx512);
  CHECK(p.bf16_gflops.has_value() == (cpuinfo_has("avx512_bf16") && !hidden &&
                                      nostrum::testing::cap_allows(nostrum::Isa::kAvx512Bf16)));
  CHECK(p.fp32_isa == (avx512 ? "avx512" : "avx2"));
  // The tiles run where the CPU has them, the cap lets them through and Linux granted tile data.
  const bool amx = cpuinfo_has("amx_tile") && cpuinfo_has("amx_bf16") && !hidden &&
                   nostrum::testing::cap_allows(nostrum::Isa::kAmx) &&
                   nostrum::cpu_features().amx_permitted;
  CHECK(p.amx_gflops.has_value() == amx);
  CHECK(amx_tile_probe_available() == amx);
  if (p.amx_gflops) {
    // 16 x 16 x 32 multiply-adds a tdpbf16ps: more than a vdpbf16ps zmm (32 of them) at any
    // issue rate above one every 16 cycles, at most 1024 flops a cycle at 8 GHz.
    CHECK(*p.amx_gflops > *p.bf16_gflops);
    CHECK(*p.amx_gflops < 1024 * 8);
  } else {
    CHECK_THROWS_WITH(amx_tile_probe_gflops(1),
                      Catch::Contains("AMX_TILE, AMX_BF16") && Catch::Contains("amx_tile_probe"));
    CHECK_FALSE(p.amx_missing.empty());
    CHECK(describe(choose_precision(p))
              .find("AMX tile probe unavailable (no " + p.amx_missing + ")") != std::string::npos);
  }
  // Where the run's conv kernels cannot reach the tiles, the AMX probe is left out, by name.
  const CeilingProbes fixed = measure_ceiling_probes("--conv-kernel fixed runs no kernel on AMX");
  CHECK_FALSE(fixed.amx_gflops.has_value());
  if (amx) {
    CHECK(fixed.amx_not_reached == "--conv-kernel fixed runs no kernel on AMX");
    CHECK(describe(choose_precision(fixed))
              .find("AMX tile probe not run (--conv-kernel fixed runs no kernel on AMX)") !=
          std::string::npos);
    CHECK(choose_precision(fixed).precision ==
          (*fixed.bf16_gflops >= 1.3 * fixed.fp32_gflops ? Precision::kBf16 : Precision::kFp32));
  } else {
    CHECK(fixed.amx_not_reached.empty());  // nothing to leave out: the tiles are missing
    CHECK(fixed.amx_missing == p.amx_missing);
  }
  // A register probe of 24 FMA chains: at least 2 GFLOP/s on any CPU with AVX2 (one 8-lane FMA
  // every 2 ns), at most 64 flops a cycle at 8 GHz.
  CHECK(p.fp32_gflops > 2);
  CHECK(p.fp32_gflops < 64 * 8);
  const PrecisionChoice c = choose_precision(p);
  if (p.bf16_gflops)
    CHECK((c.precision == Precision::kBf16) == (*best_bf16_gflops(p) >= 1.3 * p.fp32_gflops));
  else
    CHECK(c.precision == Precision::kFp32);
}
#else
TEST_CASE("precision auto on a build without a bf16 path is fp32 without probes") {
  const CeilingProbes p = measure_ceiling_probes();
  const PrecisionChoice c = choose_precision(p);
  const std::string line = describe(c);
  INFO(line);
  CHECK(p.no_bf16_path == "aarch64");
  CHECK(p.fp32_isa == "none");
  CHECK_FALSE(p.bf16_gflops.has_value());
  CHECK(c.precision == Precision::kFp32);
  CHECK(line.rfind("precision auto -> fp32: nostrum has no bf16 path on aarch64", 0) == 0);
  CHECK(line.find("(no probes run)") != std::string::npos);
  CHECK(line.find("lacks") == std::string::npos);  // no x86 feature named as missing
}

TEST_CASE("bf16 precision on a build without a bf16 path is refused naming the architecture") {
  CHECK_FALSE(bf16_available());
  CHECK_THROWS_WITH(require_bf16("--precision"),
                    Catch::Contains("bf16 precision is x86-64 only") &&
                        Catch::Contains("this aarch64 build runs fp32") &&
                        Catch::Contains("--precision") && !Catch::Contains("this CPU lacks"));
}
#endif

TEST_CASE("precision_from_option takes fp32, bf16 and auto and names the option otherwise") {
  std::string note;
  CHECK(precision_from_option("fp32", "--precision", &note) == Precision::kFp32);
  CHECK(note.empty());
  CHECK(precision_from_option("bf16", "--precision", &note) == Precision::kBf16);
  const Precision chosen = precision_from_option("auto", "--precision", &note);
  CHECK(note.find(std::string("precision auto -> ") + precision_name(chosen)) == 0);
  CHECK_THROWS_WITH(precision_from_option("fp16", "--precision", &note),
                    Catch::Contains("fp16") && Catch::Contains("--precision"));
}
