// The CPU features table: Google's cpu_features (CPUID + XCR0), the NOSTRUM_CPU_NO_BF16 override,
// the NOSTRUM_MAX_ISA cap (and oneDNN's DNNL_MAX_CPU_ISA to match) and Linux's AMX tile-data
// permission request.
#include "nostrum/core/cpu_features.hpp"

#include <cpuinfo_x86.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

namespace nostrum {

namespace {

const char* yes_no(bool b) {
  return b ? "yes" : "no";
}

bool bf16_hidden_by_environment() {
  const char* off = std::getenv("NOSTRUM_CPU_NO_BF16");
  return off && *off && *off != '0';
}

// Linux (5.16+) traps the first use of AMX tile data unless the process asked for it.
bool request_amx_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
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

CpuFeatures detect_cpu_features() {
  const cpu_features::X86Info info = cpu_features::GetX86Info();
  const cpu_features::X86Features& x = info.features;
  CpuFeatures f;
  f.vendor = info.vendor;
  f.family = info.family;
  f.model = info.model;
  f.microarchitecture =
      cpu_features::GetX86MicroarchitectureName(cpu_features::GetX86Microarchitecture(&info));
  f.avx2 = x.avx2;
  f.fma = x.fma3;
  f.avx512f = x.avx512f;
  f.avx512bw = x.avx512bw;
  f.avx512vl = x.avx512vl;
  f.avx512dq = x.avx512dq;
  f.avx512cd = x.avx512cd;
  f.avx512_bf16 = x.avx512_bf16;
  f.amx_tile = x.amx_tile;
  f.amx_bf16 = x.amx_bf16;
  return f;
}

Isa CpuFeatures::level() const {
  if (!(avx2 && fma)) return Isa::kBaseline;
  if (!avx512()) return Isa::kAvx2;
  if (!avx512_bf16) return Isa::kAvx512;
  if (!(amx_tile && amx_bf16)) return Isa::kAvx512Bf16;
  return Isa::kAmx;
}

std::string CpuFeatures::describe() const {
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
