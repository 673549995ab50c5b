// The CPU's instruction-set features, read once for the whole process: the one table the kernels
// dispatch on (OpenBLAS kernel choice, the AVX-512 direct convolutions, the bf16 GEMM). Read by
// Google's cpu_features library (Debian libcpu-features-dev), which takes a feature as present
// only when CPUID reports it and the OS saves its registers (XCR0); Linux's AMX tile permission is
// requested here on top, as the library does not.
#pragma once

#include <string>

namespace nostrum {

struct CpuFeatures {
  std::string architecture;  // the build's target: "x86_64" or "aarch64"
  std::string vendor;        // "GenuineIntel", "AuthenticAMD", ...; aarch64: "Arm", "Fujitsu", ...
  int family = 0, model = 0;
  std::string microarchitecture;  // the library's name, e.g. "AMD_ZEN3", "INTEL_SPR"; aarch64: the
                                  // part's, e.g. "Neoverse-V2", "A64FX" ("" when unknown)
  // aarch64 (cpu_features_aarch64.cpp; the x86 fields below stay false there, and these on x86):
  // the MIDR implementer and part from /proc/cpuinfo (0 where it has none, as under qemu-user),
  // and from Linux's HWCAPs Advanced SIMD (NEON), SVE (with the vector length in bits, 0 without
  // SVE), SVE2 and the BF16 and I8MM instructions (Armv8.6 BFDOT/BFMMLA, SMMLA). Detected and
  // reported ("aarch64 Arm part 0xd4f (Neoverse-V2): asimd=yes sve=yes (128-bit) sve2=yes bf16=yes
  // i8mm=yes"); no kernel uses them yet, and NOSTRUM_CPU_NO_BF16 leaves them as they are.
  int arm_implementer = 0, arm_part = 0;
  bool asimd = false, sve = false, sve2 = false, arm_bf16 = false, arm_i8mm = false;
  int sve_vector_bits = 0;
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
