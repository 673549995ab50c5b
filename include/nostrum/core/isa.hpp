// The instruction-set levels nostrum's kernels dispatch on, lowest first, and the NOSTRUM_MAX_ISA
// cap that lowers the CPU features table (cpu_features.hpp) to one of them.
#pragma once

#include <string>

namespace nostrum {

struct CpuFeatures;

// Baseline is the compiler's default target (x86-64 SSE2, or what -march= gave the build).
enum class Isa { kBaseline, kAvx2, kAvx512, kAvx512Bf16, kAmx };

// "baseline", "avx2", "avx512", "avx512_bf16", "amx".
const char* isa_name(Isa isa);

// NOSTRUM_MAX_ISA's value (any case) -> its level. Anything but avx2, avx512, avx512_bf16 or amx is
// an OptionError naming the variable and the accepted values.
Isa parse_max_isa(const std::string& value);

// Clears every feature of `f` above `cap` (never sets one): avx2 clears AVX-512 (F, BW, VL, DQ,
// CD), AVX512_BF16 and AMX; avx512 clears AVX512_BF16 and AMX; avx512_bf16 clears AMX; amx
// clears nothing. Returns the names of the features it cleared, space-separated ("" when none, as
// for a cap above what the CPU has).
std::string apply_isa_cap(CpuFeatures& f, Isa cap);

// oneDNN's DNNL_MAX_CPU_ISA value for a cap: AVX2, AVX512_CORE, AVX512_CORE_BF16, AVX512_CORE_AMX.
const char* dnnl_max_cpu_isa_for(Isa cap);

}  // namespace nostrum
