// The CPU features table's detection on x86-64: Google's cpu_features (CPUID + XCR0).
#include <cpuinfo_x86.h>

#include "nostrum/core/cpu_features.hpp"

namespace nostrum {

CpuFeatures detect_cpu_features() {
  const cpu_features::X86Info info = cpu_features::GetX86Info();
  const cpu_features::X86Features& x = info.features;
  CpuFeatures f;
  f.architecture = "x86_64";
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

}  // namespace nostrum
