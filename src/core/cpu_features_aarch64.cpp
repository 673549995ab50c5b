// The CPU features table's detection on aarch64: Google's cpu_features (Linux HWCAPs for the
// features, /proc/cpuinfo for the implementer and part), the SVE vector length from prctl.
#include <cpuinfo_aarch64.h>
#include <sys/prctl.h>

#include <cstdio>
#include <string>

#include "nostrum/core/cpu_features.hpp"

namespace nostrum {

namespace {

// MIDR implementer codes of the HPC vendors (Arm ARM, "Main ID Register"); others print as hex.
std::string implementer_name(int code) {
  switch (code) {
    case 0x41:
      return "Arm";
    case 0x46:
      return "Fujitsu";
    case 0x48:
      return "HiSilicon";
    case 0x4e:
      return "NVIDIA";
    case 0x51:
      return "Qualcomm";
    case 0x61:
      return "Apple";
    case 0xc0:
      return "Ampere";
    case 0:
      return "implementer unknown";  // /proc/cpuinfo without "CPU implementer" (qemu-user)
    default: {
      char text[32];
      std::snprintf(text, sizeof text, "implementer 0x%02x", code);
      return text;
    }
  }
}

// The cores of HPC nodes by (implementer, part); "" for the others.
std::string part_name(int implementer, int part) {
  if (implementer == 0x41) {
    switch (part) {
      case 0xd0c:
        return "Neoverse-N1";  // Ampere Altra, Graviton2
      case 0xd40:
        return "Neoverse-V1";  // Graviton3, SiPearl Rhea
      case 0xd49:
        return "Neoverse-N2";
      case 0xd4f:
        return "Neoverse-V2";  // NVIDIA Grace, Graviton4
      case 0xd8e:
        return "Neoverse-N3";
      case 0xd84:
        return "Neoverse-V3";
    }
  }
  if (implementer == 0x46 && part == 0x001) return "A64FX";         // Fugaku, Deucalion
  if (implementer == 0x48 && part == 0xd01) return "TaiShan-v110";  // Kunpeng 920
  return "";
}

// The SVE vector length this thread runs with (bits; 0 when the kernel reports none).
int sve_vector_bits() {
#if defined(PR_SVE_GET_VL)
  const int vl = prctl(PR_SVE_GET_VL);
  return vl < 0 ? 0 : (vl & PR_SVE_VL_LEN_MASK) * 8;
#else
  return 0;
#endif
}

}  // namespace

CpuFeatures detect_cpu_features() {
  const cpu_features::Aarch64Info info = cpu_features::GetAarch64Info();
  const cpu_features::Aarch64Features& a = info.features;
  CpuFeatures f;
  f.architecture = "aarch64";
  f.arm_implementer = info.implementer;
  f.arm_part = info.part;
  f.vendor = implementer_name(info.implementer);
  f.microarchitecture = part_name(info.implementer, info.part);
  f.asimd = a.asimd;
  f.sve = a.sve;
  f.sve2 = a.sve2;
  f.arm_bf16 = a.bf16;
  f.arm_i8mm = a.i8mm;
  f.sve_vector_bits = f.sve ? sve_vector_bits() : 0;
  return f;
}

}  // namespace nostrum
