// Kernel dispatch by instruction set through the CPU features table (so NOSTRUM_MAX_ISA reaches
// every kernel): the elementwise kernels' per-ISA copies written from one body
// (NOSTRUM_ISA_VARIANTS), and a record of the variant every dispatch ran, for the start-up report
// and for the tests that prove a cap holds.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "nostrum/core/isa.hpp"

namespace nostrum {

// Every place that picks a kernel by instruction set (OpenBLAS's core is reported by
// kernels::blas_core_name, oneDNN's by DNNL_MAX_CPU_ISA in the table).
enum class DispatchSite {
  kIm2colAdd,      // col2im's row adds (kernels/im2col.cpp)
  kMaxPoolScan,    // max-pool's window scan (layers/max_pool.cpp)
  kBatchNormRows,  // batch norm's row kernels (layers/batch_norm.cpp)
  kDirectConv,     // the AVX-512 direct convolutions (kernels/direct_conv.cpp)
  kBf16Convert,    // fp32 -> bf16 rounding (kernels/bf16.cpp)
  kBf16Gemm,       // the vdpbf16ps GEMM (kernels/bf16.cpp)
  kFmaProbe,       // --precision auto's fp32 FMA probe (kernels/precision_choice.cpp)
  kFp32Gemm,       // nostrum's fp32 weight-gradient GEMM (kernels/fp32_gemm.cpp)
};
constexpr int kDispatchSites = 8;
constexpr int kIsaLevels = 5;  // Isa::kBaseline .. Isa::kAmx

// "im2col_add", "max_pool_scan", "batch_norm_rows", "direct_conv", "bf16_convert", "bf16_gemm",
// "fma_probe", "fp32_gemm".
const char* dispatch_site_name(DispatchSite site);

// The copy the elementwise kernels run: avx512 where the table has AVX512F, avx2 where it has
// AVX2, else baseline. Read from the table once (a ScopedElementwiseIsa lowers it).
Isa elementwise_isa();

// For tests and benchmarks, while it lives: the elementwise kernels run their `isa` copy
// (baseline, avx2 or avx512, no higher than the table's), so one process can compare the copies'
// bits and times (tests/engine/batch_norm_isa_test.cpp, nostrum-bn-bench). Throws
// OptionError for a level the table does not reach; not for use while kernels run.
class ScopedElementwiseIsa {
 public:
  explicit ScopedElementwiseIsa(Isa isa);
  ~ScopedElementwiseIsa();
  ScopedElementwiseIsa(const ScopedElementwiseIsa&) = delete;
  ScopedElementwiseIsa& operator=(const ScopedElementwiseIsa&) = delete;

 private:
  int previous_;
};

namespace detail {
extern std::atomic<bool> dispatch_ran[kDispatchSites][kIsaLevels];
}

// Records that `site` ran its `isa` variant. Hot paths call it: after the first call it is one
// load (the flag's cache line stays shared between threads).
inline void note_dispatch(DispatchSite site, Isa isa) {
  std::atomic<bool>& ran = detail::dispatch_ran[static_cast<int>(site)][static_cast<int>(isa)];
  if (!ran.load(std::memory_order_relaxed)) ran.store(true, std::memory_order_relaxed);
}

// The variants `site` ran since the process started (or reset_dispatch_record), lowest first.
std::vector<Isa> dispatch_variants_ran(DispatchSite site);

// "batch_norm_rows=avx2 direct_conv=avx512 ...": every site that ran, its variants joined by '+';
// "none" when nothing ran yet.
std::string describe_dispatches_ran();

// Forgets what ran (tests).
void reset_dispatch_record();

}  // namespace nostrum

// Per-ISA copies of one kernel. Write the body once as an always-inline function NAME_body, then
//   NOSTRUM_ISA_VARIANTS(TEMPLATE_HEAD, SITE, NAME, (parameters), (arguments))
// defines NAME_avx512 (target avx512f, avx512bw and fma: the table's avx512 level is AVX512F + BW
// on top of AVX2 + FMA), NAME_avx2 (target avx2 and fma: the avx2 level) and NAME_baseline, each
// the body compiled for its ISA, and NAME, which records the dispatch and calls the copy
// elementwise_isa() picks. TEMPLATE_HEAD is empty or e.g. `template <typename T>` (deduced from the
// arguments; write `template <typename A NOSTRUM_COMMA typename B>` for more than one parameter).
// Unlike target_clones, which pick by the real CPU at load time, the choice goes through the
// table and so honours NOSTRUM_MAX_ISA. Outside x86 all copies are the baseline.
#if defined(__x86_64__) || defined(__i386__)
#define NOSTRUM_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,fma")))
#define NOSTRUM_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define NOSTRUM_TARGET_AVX512
#define NOSTRUM_TARGET_AVX2
#endif
#define NOSTRUM_ALWAYS_INLINE inline __attribute__((always_inline))
#define NOSTRUM_COMMA ,

#define NOSTRUM_ISA_VARIANTS(TEMPLATE_HEAD, SITE, NAME, PARAMETERS, ARGUMENTS) \
  TEMPLATE_HEAD NOSTRUM_TARGET_AVX512 void NAME##_avx512 PARAMETERS {          \
    NAME##_body ARGUMENTS;                                                     \
  }                                                                            \
  NOSTRUM_ISA_VARIANTS_BELOW_AVX512(SITE, NAME, PARAMETERS, ARGUMENTS, TEMPLATE_HEAD)

// NOSTRUM_ISA_VARIANTS with the AVX-512 copy written by hand (intrinsics) on x86: NAME_avx512
// calls AVX512_KERNEL (a function of the same parameters, compiled for that target); elsewhere it
// is the body's copy like the others.
#if defined(__x86_64__) || defined(__i386__)
#define NOSTRUM_ISA_HAND_AVX512_KERNEL(NAME, AVX512_KERNEL) AVX512_KERNEL
#else
#define NOSTRUM_ISA_HAND_AVX512_KERNEL(NAME, AVX512_KERNEL) NAME##_body
#endif
#define NOSTRUM_ISA_VARIANTS_HAND_AVX512(TEMPLATE_HEAD, SITE, NAME, AVX512_KERNEL, PARAMETERS, \
                                         ARGUMENTS)                                            \
  TEMPLATE_HEAD NOSTRUM_TARGET_AVX512 void NAME##_avx512 PARAMETERS {                          \
    NOSTRUM_ISA_HAND_AVX512_KERNEL(NAME, AVX512_KERNEL) ARGUMENTS;                             \
  }                                                                                            \
  NOSTRUM_ISA_VARIANTS_BELOW_AVX512(SITE, NAME, PARAMETERS, ARGUMENTS, TEMPLATE_HEAD)

// The avx2 and baseline copies and the dispatcher (the two macros above); the template head comes
// last, as variadic arguments, since a NOSTRUM_COMMA in it is a comma once passed on.
#define NOSTRUM_ISA_VARIANTS_BELOW_AVX512(SITE, NAME, PARAMETERS, ARGUMENTS, ...) \
  __VA_ARGS__ NOSTRUM_TARGET_AVX2 void NAME##_avx2 PARAMETERS {                   \
    NAME##_body ARGUMENTS;                                                        \
  }                                                                               \
  __VA_ARGS__ void NAME##_baseline PARAMETERS {                                   \
    NAME##_body ARGUMENTS;                                                        \
  }                                                                               \
  __VA_ARGS__ void NAME PARAMETERS {                                              \
    const ::nostrum::Isa isa_ = ::nostrum::elementwise_isa();                     \
    ::nostrum::note_dispatch(SITE, isa_);                                         \
    if (isa_ == ::nostrum::Isa::kAvx512)                                          \
      NAME##_avx512 ARGUMENTS;                                                    \
    else if (isa_ == ::nostrum::Isa::kAvx2)                                       \
      NAME##_avx2 ARGUMENTS;                                                      \
    else                                                                          \
      NAME##_baseline ARGUMENTS;                                                  \
  }
