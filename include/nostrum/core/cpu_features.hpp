// The CPU's instruction-set features, read once for the whole process: the one table the kernels
// dispatch on (OpenBLAS kernel choice, the AVX-512 direct convolutions, the bf16 GEMM). Read by
// Google's cpu_features library (Debian libcpu-features-dev), which takes a feature as present
// only when CPUID reports it and the OS saves its registers (XCR0); Linux's AMX tile permission is
// requested here on top, as the library does not.
#pragma once

#include <string>

namespace nostrum {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  int family = 0, model = 0;
  std::string microarchitecture;  // the library's name, e.g. "AMD_ZEN3", "INTEL_SPR"
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
  bool avx512_bf16 = false;  // vdpbf16ps
  bool amx_tile = false, amx_bf16 = false;
  // Linux granted tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); requested once,
  // only where amx_tile and amx_bf16. False when refused (old kernel, seccomp).
  bool amx_permitted = false;

  // AVX512F and BW: what the bf16 conversion and the FMA probe use.
  bool avx512() const { return avx512f && avx512bw; }
  // e.g. "AuthenticAMD family 25 model 1 (AMD_ZEN3): avx2=yes fma=yes avx512=no avx512_bf16=no
  // amx_bf16=no"
  std::string describe() const;
};

// What CPUID and the OS report, without the environment's override or the AMX permission request.
CpuFeatures detect_cpu_features();

// The process's table, detected once. NOSTRUM_CPU_NO_BF16=1 in the environment reports
// AVX512_BF16 and AMX absent (to test the error and skip paths on a CPU that has them).
const CpuFeatures& cpu_features();

}  // namespace nostrum
