// The CPU features table: Google's cpu_features (CPUID + XCR0), the NOSTRUM_CPU_NO_BF16 override,
// the NOSTRUM_MAX_ISA cap (and oneDNN's DNNL_MAX_CPU_ISA to match) and Linux's AMX tile-data
// permission request.
#include "nostrum/core/cpu_features.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace nostrum {

namespace {

const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

// "0x0d4f" for (0xd4f, 4).
std::string hex(int value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*x", digits, value);
  return text;
}

bool bf16_hidden_by_environment() {
  const char* off = std::getenv("NOSTRUM_CPU_NO_BF16");
  return off && *off && *off != '0';
}

// Linux (5.16+) traps the first use of AMX tile data unless the process asked for it.
bool request_amx_tile_data() {
#if defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;  // AMX is x86's
#endif
}

// NOSTRUM_MAX_ISA (empty or unset: no cap) lowers f; oneDNN gets the same cap through
// DNNL_MAX_CPU_ISA unless the user set that. oneDNN reads the variable once, at its first
// primitive; whoever calls oneDNN makes sure this table is initialised before then.
void apply_cap_from_environment(CpuFeatures& f) {
  const char* value = std::getenv("NOSTRUM_MAX_ISA");
  if (value && *value) {
    const Isa cap = parse_max_isa(value);
    f.max_isa = isa_name(cap);
    f.cap_removed = apply_isa_cap(f, cap);
    setenv("DNNL_MAX_CPU_ISA", dnnl_max_cpu_isa_for(cap), /*overwrite=*/0);  // the user's wins
  }
  const char* dnnl = std::getenv("DNNL_MAX_CPU_ISA");  // as oneDNN will read it
  f.dnnl_max_cpu_isa = dnnl ? dnnl : "";
}

}  // namespace

// detect_cpu_features(): cpu_features_x86_64.cpp or cpu_features_aarch64.cpp, by the target.

Isa CpuFeatures::level() const {
  if (!(avx2 && fma)) return Isa::kBaseline;
  if (!avx512()) return Isa::kAvx2;
  if (!avx512_bf16) return Isa::kAvx512;
  if (!(amx_tile && amx_bf16)) return Isa::kAvx512Bf16;
  return Isa::kAmx;
}

std::string CpuFeatures::describe() const {
  if (architecture == "aarch64") {
    std::string s = "aarch64 " + vendor + " part " + hex(arm_part, 3);
    if (!microarchitecture.empty()) s += " (" + microarchitecture + ")";
    s += std::string(": asimd=") + yes_no(asimd) + " sve=" + yes_no(sve);
    if (sve) s += " (" + std::to_string(sve_vector_bits) + "-bit)";
    return s + " sve2=" + yes_no(sve2) + " bf16=" + yes_no(arm_bf16) + " i8mm=" + yes_no(arm_i8mm);
  }
  std::string s = vendor + " family " + std::to_string(family) + " model " + std::to_string(model) +
                  " (" + microarchitecture + "): avx2=" + yes_no(avx2) + " fma=" + yes_no(fma) +
                  " avx512=" + yes_no(avx512()) + " avx512_bf16=" + yes_no(avx512_bf16) +
                  " amx_bf16=" + yes_no(amx_bf16);
  if (amx_bf16) s += std::string(" amx_tile_data=") + (amx_permitted ? "granted" : "refused");
  if (!max_isa.empty()) s += " " + describe_cap();
  return s;
}

std::string CpuFeatures::describe_cap() const {
  if (max_isa.empty()) return "";
  return "NOSTRUM_MAX_ISA=" + max_isa + " (cleared " +
         (cap_removed.empty() ? "nothing" : cap_removed) +
         "; DNNL_MAX_CPU_ISA=" + dnnl_max_cpu_isa + ")";
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures table = [] {
    CpuFeatures f = detect_cpu_features();
    if (bf16_hidden_by_environment()) f.avx512_bf16 = f.amx_bf16 = false;
    apply_cap_from_environment(f);
    if (f.amx_tile && f.amx_bf16) f.amx_permitted = request_amx_tile_data();
    return f;
  }();
  return table;
}

}  // namespace nostrum
