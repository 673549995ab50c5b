// The elementwise kernels' ISA choice (from the CPU features table) and the record of the variant
// every dispatch ran.
#include "nostrum/core/isa_dispatch.hpp"

#include <string>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum {

namespace detail {
std::atomic<bool> dispatch_ran[kDispatchSites][kIsaLevels];
}

const char* dispatch_site_name(DispatchSite site) {
  switch (site) {
    case DispatchSite::kIm2colAdd:
      return "im2col_add";
    case DispatchSite::kMaxPoolScan:
      return "max_pool_scan";
    case DispatchSite::kBatchNormRows:
      return "batch_norm_rows";
    case DispatchSite::kDirectConv:
      return "direct_conv";
    case DispatchSite::kBf16Convert:
      return "bf16_convert";
    case DispatchSite::kBf16Gemm:
      return "bf16_gemm";
    case DispatchSite::kFmaProbe:
      return "fma_probe";
    case DispatchSite::kFp32Gemm:
      return "fp32_gemm";
  }
  return "?";
}

namespace {

Isa table_elementwise_isa() {
  static const Isa isa = [] {
    const CpuFeatures& f = cpu_features();
    if (f.avx512f) return Isa::kAvx512;
    if (f.avx2) return Isa::kAvx2;
    return Isa::kBaseline;
  }();
  return isa;
}

// A ScopedElementwiseIsa's level, or -1: the table's.
std::atomic<int> elementwise_override{-1};

}  // namespace

Isa elementwise_isa() {
  const int forced = elementwise_override.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : table_elementwise_isa();
}

ScopedElementwiseIsa::ScopedElementwiseIsa(Isa isa)
    : previous_(elementwise_override.load(std::memory_order_relaxed)) {
  NOSTRUM_CHECK(isa <= table_elementwise_isa(), OptionError,
                std::string("the elementwise kernels' ") + isa_name(isa) +
                    " copy asked, above the CPU features table's " +
                    isa_name(table_elementwise_isa()));
  elementwise_override.store(static_cast<int>(isa), std::memory_order_relaxed);
}

ScopedElementwiseIsa::~ScopedElementwiseIsa() {
  elementwise_override.store(previous_, std::memory_order_relaxed);
}

std::vector<Isa> dispatch_variants_ran(DispatchSite site) {
  std::vector<Isa> ran;
  for (int i = 0; i < kIsaLevels; ++i)
    if (detail::dispatch_ran[static_cast<int>(site)][i].load(std::memory_order_relaxed))
      ran.push_back(static_cast<Isa>(i));
  return ran;
}

std::string describe_dispatches_ran() {
  std::string s;
  for (int site = 0; site < kDispatchSites; ++site) {
    const std::vector<Isa> ran = dispatch_variants_ran(static_cast<DispatchSite>(site));
    if (ran.empty()) continue;
    if (!s.empty()) s += ' ';
    s += dispatch_site_name(static_cast<DispatchSite>(site));
    for (size_t i = 0; i < ran.size(); ++i)
      s += (i == 0 ? "=" : "+") + std::string(isa_name(ran[i]));
  }
  return s.empty() ? "none" : s;
}

void reset_dispatch_record() {
  for (auto& site : detail::dispatch_ran)
    for (auto& ran : site) ran.store(false, std::memory_order_relaxed);
}

}  // namespace nostrum
