// The CPU features table on aarch64 against what the Linux kernel reports: the HWCAP bits of the
// auxiliary vector (what /proc/cpuinfo's Features line is made from; qemu-user emulates them), the
// SVE vector length read by the instruction itself, and the MIDR fields where /proc/cpuinfo has
// them.
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "nostrum/core/cpu_features.hpp"

namespace {

bool hwcap(unsigned long bit) {
  return (getauxval(AT_HWCAP) & bit) != 0;
}

bool hwcap2(unsigned long bit) {
  return (getauxval(AT_HWCAP2) & bit) != 0;
}

// The vector length in bits, as the SVE instruction RDVL gives it (call only where SVE is present).
int rdvl_bits() {
  long bytes = 0;
  __asm__ volatile(".arch_extension sve\n\trdvl %0, #1" : "=r"(bytes));
  return int(bytes) * 8;
}

// "CPU implementer" and "CPU part" of the first processor in /proc/cpuinfo; -1 where absent (under
// qemu-user the file is the host's).
struct Midr {
  int implementer = -1, part = -1;
};

Midr read_midr() {
  std::ifstream in("/proc/cpuinfo");
  Midr m;
  std::string line;
  while (std::getline(in, line) && (m.implementer < 0 || m.part < 0)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const int value = int(std::strtol(line.c_str() + colon + 1, nullptr, 0));
    if (key == "CPU implementer" && m.implementer < 0) m.implementer = value;
    if (key == "CPU part" && m.part < 0) m.part = value;
  }
  return m;
}

}  // namespace

TEST_CASE("the CPU features table agrees with the kernel's HWCAPs", "[cpu_features]") {
  const nostrum::CpuFeatures f = nostrum::detect_cpu_features();
  INFO(f.describe());
  CHECK(f.architecture == "aarch64");
  CHECK(f.asimd == hwcap(HWCAP_ASIMD));
  CHECK(f.sve == hwcap(HWCAP_SVE));
  CHECK(f.sve2 == hwcap2(HWCAP2_SVE2));
  CHECK(f.arm_bf16 == hwcap2(HWCAP2_BF16));
  CHECK(f.arm_i8mm == hwcap2(HWCAP2_I8MM));
  CHECK(f.asimd);  // every Armv8-A Linux system: the baseline this build is compiled for
  // The x86 side stays empty, so every x86 kernel's CPU check is false here.
  CHECK_FALSE(f.avx2);
  CHECK_FALSE(f.fma);
  CHECK_FALSE(f.avx512f);
  CHECK_FALSE(f.avx512());
  CHECK_FALSE(f.avx512_bf16);
  CHECK_FALSE(f.amx_bf16);
}

TEST_CASE("the SVE vector length is the one the instructions run with", "[cpu_features]") {
  const nostrum::CpuFeatures f = nostrum::detect_cpu_features();
  INFO(f.describe());
  if (!f.sve) {
    CHECK(f.sve_vector_bits == 0);
    return;
  }
  CHECK(f.sve_vector_bits == rdvl_bits());
  CHECK(f.sve_vector_bits % 128 == 0);
  CHECK(f.sve_vector_bits >= 128);
  CHECK(f.sve_vector_bits <= 2048);
}

TEST_CASE("the implementer and part are /proc/cpuinfo's, or 0 where it has none",
          "[cpu_features]") {
  const nostrum::CpuFeatures f = nostrum::detect_cpu_features();
  const Midr m = read_midr();
  INFO(f.describe());
  if (m.implementer < 0) {  // not an Arm kernel's /proc/cpuinfo (qemu-user shows the host's)
    CHECK(f.arm_implementer == 0);
    CHECK(f.arm_part == 0);
    CHECK(f.describe().rfind("aarch64 implementer unknown part 0x000: asimd=", 0) == 0);
  } else {
    CHECK(f.arm_implementer == m.implementer);
    CHECK(f.arm_part == m.part);
  }
}

TEST_CASE("the process's table is the detected one, no AMX permission asked", "[cpu_features]") {
  const nostrum::CpuFeatures detected = nostrum::detect_cpu_features();
  const nostrum::CpuFeatures& table = nostrum::cpu_features();
  CHECK(&table == &nostrum::cpu_features());  // detected once
  CHECK(table.asimd == detected.asimd);
  CHECK(table.sve == detected.sve);
  CHECK(table.sve2 == detected.sve2);
  CHECK(table.arm_bf16 == detected.arm_bf16);  // NOSTRUM_CPU_NO_BF16 hides only x86's bf16
  CHECK(table.describe() == detected.describe());
  CHECK_FALSE(table.amx_permitted);
}
