// Every kernel dispatch takes the variant the CPU features table allows, so NOSTRUM_MAX_ISA holds:
// a ResNet-18 training step plus direct calls of the kernels it may not reach, then the record of
// what ran (nostrum/core/isa_dispatch.hpp) against what the table allows. CTest runs this binary
// once more under NOSTRUM_MAX_ISA=avx2 (tests/CMakeLists.txt), where no AVX-512 variant may run.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "grad_check.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/direct_conv.hpp"
#include "nostrum/kernels/fp32_gemm.hpp"
#include "nostrum/kernels/im2col.hpp"
#include "nostrum/kernels/precision_choice.hpp"
#include "nostrum/model/model.hpp"

using namespace nostrum;

namespace {

// The one variant `site` may have run under the table f (the sites' own rules, from the table's
// fields: a dispatch that reads the CPU instead runs another one).
std::vector<Isa> allowed(DispatchSite site, const CpuFeatures& f) {
  const Isa elementwise = f.avx512f ? Isa::kAvx512 : f.avx2 ? Isa::kAvx2 : Isa::kBaseline;
  switch (site) {
    case DispatchSite::kIm2colAdd:
    case DispatchSite::kMaxPoolScan:
    case DispatchSite::kBatchNormRows:
      return {elementwise};
    case DispatchSite::kDirectConv:
      return f.avx512f ? std::vector<Isa>{Isa::kAvx512} : std::vector<Isa>{};
    case DispatchSite::kBf16Convert:
      return {f.avx512() ? Isa::kAvx512 : Isa::kBaseline};
    case DispatchSite::kBf16Gemm:  // its AMX engine too where the table has AMX and tile data
      if (f.avx512_bf16 && f.amx_tile && f.amx_bf16 && f.amx_permitted)
        return {Isa::kAvx512Bf16, Isa::kAmx};
      return f.avx512_bf16 ? std::vector<Isa>{Isa::kAvx512Bf16} : std::vector<Isa>{};
    case DispatchSite::kFp32Gemm:
      return f.avx512f ? std::vector<Isa>{Isa::kAvx512} : std::vector<Isa>{};
    case DispatchSite::kFmaProbe:
      return f.avx512()          ? std::vector<Isa>{Isa::kAvx512}
             : (f.avx2 && f.fma) ? std::vector<Isa>{Isa::kAvx2}
                                 : std::vector<Isa>{};
  }
  return {};
}

std::string names(const std::vector<Isa>& isas) {
  std::string s;
  for (Isa i : isas) s += std::string(s.empty() ? "" : "+") + isa_name(i);
  return s.empty() ? "(none)" : s;
}

}  // namespace

TEST_CASE("every kernel dispatch runs the variant the CPU features table allows",
          "[isa_dispatch][engine]") {
  const CpuFeatures& f = cpu_features();
  INFO(f.describe());
  reset_dispatch_record();

  // A training step of a ResNet-18 (max pool, batch norm, 7x7/3x3/1x1 convolutions) at 32x32.
  model::ModelConfig c;
  c.name = "resnet18";
  c.num_classes = 10;
  c.in_channels = 3;
  auto m = model::Model::create(c);
  m->build(2, 32, 32);
  m->init(7);
  const std::vector<float> x = testing::random_vector(2 * 32 * 32 * 3, 1);
  const std::vector<int32_t> y = {1, 3};
  m->forward(x.data(), 2, true);
  m->loss(y.data(), 0.1f, 0.5f);
  m->backward();

  // What the step may not reach on every table: col2im's adds, the bf16 conversion (and its GEMM
  // where the table has AVX512_BF16, on AMX tiles too where it has AMX), the fp32 FMA probe, the
  // fp32 weight-gradient GEMM (where the table has AVX512F).
  kernels::PatchShape s;
  s.N = 1, s.H = s.W = 6, s.C = 32, s.R = s.S = 3, s.pad = 1, s.P = s.Q = 6;
  const std::vector<float> col = testing::random_vector(size_t(s.rows() * s.row_length()), 2);
  std::vector<float> d_in(size_t(s.N) * s.H * s.W * s.C, 0.0f);
  kernels::col2im_nhwc_add(d_in.data(), col.data(), s, 0, s.rows(), 0, s.C);
  std::vector<uint16_t> half(col.size());
  kernels::convert_to_bf16(half.data(), col.data(), int64_t(col.size()));
  if (kernels::bf16_available()) {
    std::vector<float> out(32 * 32);
    kernels::gemm_bf16(kernels::Trans::kNo, kernels::Trans::kNo, 32, 32, 32, 1.0f, col.data(), 32,
                       col.data(), 32, 0.0f, out.data(), 32);
    if (kernels::bf16_amx_available())
      kernels::gemm_bf16(kernels::Trans::kNo, kernels::Trans::kNo, 32, 32, 32, 1.0f, col.data(), 32,
                         col.data(), 32, 0.0f, out.data(), 32, kernels::Bf16Engine::kAmx);
  }
  if (f.avx2 && f.fma) kernels::fp32_fma_probe_gflops(1000);
  if (kernels::fp32_gemm_available()) {
    std::vector<float> out(32 * 32);
    kernels::gemm_fp32_tn(32, 32, 32, col.data(), 32, col.data(), 32, 0.0f, out.data(), 32);
  }

  INFO("ran: " << describe_dispatches_ran());
  for (int i = 0; i < kDispatchSites; ++i) {
    const DispatchSite site = static_cast<DispatchSite>(i);
    INFO(dispatch_site_name(site));
    CHECK(names(dispatch_variants_ran(site)) == names(allowed(site, f)));
  }
  // The direct convolutions are the table's to allow: under an AVX2 cap, not even offered.
  CHECK(kernels::direct_conv_available() == f.avx512f);
  const char* cap = std::getenv("NOSTRUM_MAX_ISA");
  if (cap && std::string(cap) == "avx2") {
    CHECK(f.level() <= Isa::kAvx2);
    for (int i = 0; i < kDispatchSites; ++i)
      for (Isa isa : dispatch_variants_ran(static_cast<DispatchSite>(i))) CHECK(isa <= Isa::kAvx2);
  }
}
