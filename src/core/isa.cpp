// NOSTRUM_MAX_ISA: parsing the cap and lowering a CPU features table to it.
#include "nostrum/core/isa.hpp"

#include <cctype>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum {

namespace {

constexpr const char* kAccepted = "avx2, avx512, avx512_bf16 or amx";

// Clears `feature` and records its name when it was set.
void clear(bool& feature, const char* name, std::string& removed) {
  if (!feature) return;
  feature = false;
  if (!removed.empty()) removed += ' ';
  removed += name;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512_bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

Isa parse_max_isa(const std::string& value) {
  std::string v;
  for (char c : value) v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (v == isa_name(isa)) return isa;
  throw OptionError("unknown NOSTRUM_MAX_ISA value '" + value + "'",
                    "environment variable NOSTRUM_MAX_ISA",
                    std::string("NOSTRUM_MAX_ISA accepts ") + kAccepted + "; unset it for no cap");
}

std::string apply_isa_cap(CpuFeatures& f, Isa cap) {
  std::string removed;
  if (cap < Isa::kAvx512) {
    clear(f.avx512f, "avx512f", removed);
    clear(f.avx512bw, "avx512bw", removed);
    clear(f.avx512vl, "avx512vl", removed);
    clear(f.avx512dq, "avx512dq", removed);
    clear(f.avx512cd, "avx512cd", removed);
  }
  if (cap < Isa::kAvx512Bf16) clear(f.avx512_bf16, "avx512_bf16", removed);
  if (cap < Isa::kAmx) {
    clear(f.amx_tile, "amx_tile", removed);
    clear(f.amx_bf16, "amx_bf16", removed);
  }
  return removed;
}

const char* dnnl_max_cpu_isa_for(Isa cap) {
  switch (cap) {
    case Isa::kBaseline:  // not a cap NOSTRUM_MAX_ISA accepts; oneDNN's lowest level
      return "SSE41";
    case Isa::kAvx2:
      return "AVX2";
    case Isa::kAvx512:
      return "AVX512_CORE";
    case Isa::kAvx512Bf16:
      return "AVX512_CORE_BF16";
    case Isa::kAmx:
      return "AVX512_CORE_AMX";
  }
  return "ALL";
}

}  // namespace nostrum
