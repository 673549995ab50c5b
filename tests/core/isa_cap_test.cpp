// NOSTRUM_MAX_ISA: each level lowers the CPU features table to exactly its features, a cap never
// raises one, a cap at or above the CPU changes nothing, an unknown value is refused by name; the
// process's table is the detected one lowered by the environment's cap (run by CTest with none,
// avx2, avx512 and an unknown value: tests/core/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa.hpp"

namespace {

using nostrum::CpuFeatures;
using nostrum::Isa;

// A CPU with every feature the table knows.
CpuFeatures everything() {
  CpuFeatures f;
  f.avx2 = f.fma = true;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512cd = true;
  f.avx512_bf16 = f.amx_tile = f.amx_bf16 = true;
  return f;
}

// The flags as one string, to compare whole tables.
std::string flags(const CpuFeatures& f) {
  std::string s;
  for (bool b : {f.avx2, f.fma, f.avx512f, f.avx512bw, f.avx512vl, f.avx512dq, f.avx512cd,
                 f.avx512_bf16, f.amx_tile, f.amx_bf16})
    s += b ? '1' : '0';
  return s;
}

}  // namespace

TEST_CASE("NOSTRUM_MAX_ISA's values parse in any case and others are refused by name",
          "[isa_cap]") {
  CHECK(nostrum::parse_max_isa("avx2") == Isa::kAvx2);
  CHECK(nostrum::parse_max_isa("AVX512") == Isa::kAvx512);
  CHECK(nostrum::parse_max_isa("avx512_bf16") == Isa::kAvx512Bf16);
  CHECK(nostrum::parse_max_isa("Amx") == Isa::kAmx);
  for (const char* bad : {"avx", "sse4", "avx512bf16", "avx2 ", "baseline", "AVX512_CORE"}) {
    INFO(bad);
    CHECK_THROWS_AS(nostrum::parse_max_isa(bad), nostrum::OptionError);
    CHECK_THROWS_WITH(nostrum::parse_max_isa(bad),
                      Catch::Contains("NOSTRUM_MAX_ISA") && Catch::Contains(bad) &&
                          Catch::Contains("avx2, avx512, avx512_bf16 or amx"));
  }
}

TEST_CASE("each cap lowers a full table to exactly its level", "[isa_cap]") {
  struct Case {
    Isa cap;
    const char* flags;    // avx2 fma avx512 f/bw/vl/dq/cd avx512_bf16 amx_tile amx_bf16
    const char* removed;  // what the cap reports it cleared
  };
  const Case cases[] = {
      {Isa::kAvx2, "1100000000",
       "avx512f avx512bw avx512vl avx512dq avx512cd avx512_bf16 amx_tile amx_bf16"},
      {Isa::kAvx512, "1111111000", "avx512_bf16 amx_tile amx_bf16"},
      {Isa::kAvx512Bf16, "1111111100", "amx_tile amx_bf16"},
      {Isa::kAmx, "1111111111", ""},
  };
  for (const Case& c : cases) {
    INFO(nostrum::isa_name(c.cap));
    CpuFeatures f = everything();
    CHECK(nostrum::apply_isa_cap(f, c.cap) == c.removed);
    CHECK(flags(f) == c.flags);
    CHECK(f.level() == c.cap);
  }
}

TEST_CASE("a cap never raises a feature, and one at or above the CPU changes nothing",
          "[isa_cap]") {
  for (Isa cap : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    INFO(nostrum::isa_name(cap));
    CpuFeatures none;  // a CPU below AVX2
    CHECK(nostrum::apply_isa_cap(none, cap).empty());
    CHECK(flags(none) == "0000000000");
    CpuFeatures avx2_only;
    avx2_only.avx2 = avx2_only.fma = true;
    CHECK(nostrum::apply_isa_cap(avx2_only, cap).empty());
    CHECK(flags(avx2_only) == "1100000000");
  }
  // This machine's CPU under its own level and under amx: the table as detected.
  const CpuFeatures detected = nostrum::detect_cpu_features();
  INFO(detected.describe());
  for (Isa cap : {std::max(detected.level(), Isa::kAvx2), Isa::kAmx}) {
    CpuFeatures f = detected;
    CHECK(nostrum::apply_isa_cap(f, cap).empty());
    CHECK(flags(f) == flags(detected));
  }
}

TEST_CASE("oneDNN's DNNL_MAX_CPU_ISA names for the caps", "[isa_cap]") {
  CHECK(std::string(nostrum::dnnl_max_cpu_isa_for(Isa::kAvx2)) == "AVX2");
  CHECK(std::string(nostrum::dnnl_max_cpu_isa_for(Isa::kAvx512)) == "AVX512_CORE");
  CHECK(std::string(nostrum::dnnl_max_cpu_isa_for(Isa::kAvx512Bf16)) == "AVX512_CORE_BF16");
  CHECK(std::string(nostrum::dnnl_max_cpu_isa_for(Isa::kAmx)) == "AVX512_CORE_AMX");
}

TEST_CASE("the process's table is the detected one under the environment's cap", "[isa_cap]") {
  const char* value = std::getenv("NOSTRUM_MAX_ISA");
  const char* dnnl_before = std::getenv("DNNL_MAX_CPU_ISA");  // before the table is made
  const std::string dnnl_user = dnnl_before ? dnnl_before : "";
  Isa cap = Isa::kAmx;
  bool capped = value && *value;
  if (capped) {
    try {
      cap = nostrum::parse_max_isa(value);
    } catch (const nostrum::OptionError&) {
      // An unknown value: every use of the table refuses it, naming the variable.
      for (int i = 0; i < 2; ++i)
        CHECK_THROWS_WITH(nostrum::cpu_features(), Catch::Contains("NOSTRUM_MAX_ISA") &&
                                                       Catch::Contains(value) &&
                                                       Catch::Contains("avx512_bf16"));
      return;
    }
  }
  CpuFeatures expected = nostrum::detect_cpu_features();
  const char* off = std::getenv("NOSTRUM_CPU_NO_BF16");
  if (off && *off && *off != '0') expected.avx512_bf16 = expected.amx_bf16 = false;
  const std::string removed = capped ? nostrum::apply_isa_cap(expected, cap) : "";
  const CpuFeatures& table = nostrum::cpu_features();
  INFO(table.describe());
  CHECK(flags(table) == flags(expected));
  CHECK(table.max_isa == (capped ? nostrum::isa_name(cap) : ""));
  CHECK(table.cap_removed == removed);
  if (capped) CHECK(table.level() <= cap);
  // oneDNN follows the cap unless the user chose its ISA.
  const char* dnnl = std::getenv("DNNL_MAX_CPU_ISA");
  const std::string dnnl_now = dnnl ? dnnl : "";
  if (dnnl_before)
    CHECK(dnnl_now == dnnl_user);
  else
    CHECK(dnnl_now == (capped ? nostrum::dnnl_max_cpu_isa_for(cap) : ""));
  CHECK(table.dnnl_max_cpu_isa == dnnl_now);
  // The start-up line's text names the cap and what it cleared.
  if (capped) {
    CHECK_THAT(table.describe(),
               Catch::Contains(std::string("NOSTRUM_MAX_ISA=") + nostrum::isa_name(cap)));
    CHECK_THAT(table.describe_cap(), Catch::Contains(removed.empty() ? "nothing" : removed));
  } else {
    CHECK(table.describe_cap().empty());
  }
  // AMX tile data is asked for only where the capped table still has AMX.
  if (!(table.amx_tile && table.amx_bf16)) CHECK_FALSE(table.amx_permitted);
}
