// The CPU's instruction-set features, read once for the whole process: the one table the kernels
// dispatch on (OpenBLAS kernel choice, the AVX-512 direct convolutions, the bf16 GEMM). Read by
// Google's cpu_features library (Debian libcpu-features-dev), which takes a feature as present
// only when CPUID reports it and the OS saves its registers (XCR0); lowered to the NOSTRUM_MAX_ISA
// cap (isa.hpp) when one is set; Linux's AMX tile permission is requested here on top, as the
// library does not.
#pragma once

#include <string>

#include "nostrum/core/isa.hpp"

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
  // NOSTRUM_MAX_ISA as read ("avx2", "avx512", "avx512_bf16", "amx"; empty: no cap) and the
  // features it cleared on this CPU ("avx512f avx512bw ..."; empty when it cleared none).
  std::string max_isa, cap_removed;
  // DNNL_MAX_CPU_ISA as oneDNN will read it: the user's value when they set one, else the cap's
  // (set at table init), else empty (oneDNN takes the best ISA it finds).
  std::string dnnl_max_cpu_isa;

  // AVX512F and BW: what the bf16 conversion and the FMA probe use.
  bool avx512() const { return avx512f && avx512bw; }
  // AMX bf16 tiles usable here: AMX_TILE, AMX_BF16 and Linux's tile-data permission (what the
  // tile probe, nostrum's AMX GEMM and oneDNN's AMX primitives need).
  bool amx_tiles() const { return amx_tile && amx_bf16 && amx_permitted; }
  // The highest level every feature of which the table has (isa.hpp): amx needs AMX_TILE +
  // AMX_BF16 on top of avx512_bf16, which needs AVX512_BF16 on top of avx512 (avx512()), which
  // needs avx2 (AVX2 + FMA).
  Isa level() const;
  // e.g. "AuthenticAMD family 25 model 1 (AMD_ZEN3): avx2=yes fma=yes avx512=no avx512_bf16=no
  // amx_bf16=no"; with a cap, "... NOSTRUM_MAX_ISA=avx2 (cleared avx512f avx512bw avx512vl
  // avx512dq avx512cd avx512_bf16; DNNL_MAX_CPU_ISA=AVX2)".
  std::string describe() const;
  // "NOSTRUM_MAX_ISA=avx2 (cleared avx512f ...; DNNL_MAX_CPU_ISA=AVX2)"; "" without a cap.
  std::string describe_cap() const;
};

// What CPUID and the OS report, without the environment's overrides or the AMX permission request.
CpuFeatures detect_cpu_features();

// The process's table, detected once; every kernel dispatch reads it. NOSTRUM_CPU_NO_BF16=1 in the
// environment reports AVX512_BF16 and AMX absent (to test the error and skip paths on a CPU that
// has them); NOSTRUM_MAX_ISA=avx2|avx512|avx512_bf16|amx lowers the table to that level
// (apply_isa_cap) and, unless DNNL_MAX_CPU_ISA is set, sets it to the same level for oneDNN. AMX
// tile data is requested from Linux only where the table still has AMX. An unknown NOSTRUM_MAX_ISA
// throws OptionError (naming the variable and the accepted values) from every call.
const CpuFeatures& cpu_features();

}  // namespace nostrum
