// oneDNN's fp32 convolution passes (kernels/onednn_conv.hpp) against the float64 reference on every
// ResNet-50 and resnet8 convolution geometry and on odd shapes, at 1 and 2 threads; the library
// report and the errors.
#include <omp.h>
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "isa_cap_env.hpp"

#include "model_convs.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/onednn_candidates.hpp"
#include "onednn_conv_check.hpp"

using namespace onednn_check;
using nostrum::testing::cpuinfo_has;

namespace {

// Whether Linux lets this process use AMX tile data (ARCH_GET_XCOMP_PERM, XFEATURE_XTILEDATA).
// Always false off x86-64, which has no AMX.
bool linux_permits_amx_tiles() {
#if defined(__x86_64__)
  constexpr int kArchGetXcompPerm = 0x1022, kXfeatureXtiledata = 18;
  uint64_t features = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 &&
         (features >> kXfeatureXtiledata & 1) != 0;
#else
  return false;
#endif
}

void check_all(const std::vector<ConvGeometry>& shapes, uint32_t seed) {
  const int saved = omp_get_max_threads();
  std::mt19937 rng(seed);
  for (const ConvGeometry& g : shapes) {
    const Tensors t = random_tensors(g, rng);
    const Reference ref(g, t);
    for (int threads : {1, 2}) check_passes(g, t, ref, Precision::kFp32, threads);
  }
  omp_set_num_threads(saved);
}

}  // namespace

TEST_CASE("oneDNN fp32 conv: every ResNet-50 and resnet8 geometry, three passes, 1 and 2 threads",
          "[onednn]") {
  check_all(model_shapes(), 1);
}

TEST_CASE("oneDNN fp32 conv: odd shapes, three passes, 1 and 2 threads", "[onednn]") {
  check_all(odd_shapes(), 2);
}

TEST_CASE("oneDNN conv: an object called at another thread count recreates its primitive",
          "[onednn]") {
  const int saved = omp_get_max_threads();
  const ConvGeometry g = geometry(2, 12, 12, 32, 48, 3, 3, 1, 1);
  std::mt19937 rng(3);
  const Tensors t = random_tensors(g, rng);
  const Reference ref(g, t);
  omp_set_num_threads(2);
  OnednnConv conv(g, ConvPass::kBackwardWeights, Precision::kFp32);
  Workspace ws(conv);
  omp_set_num_threads(1);
  auto d_weight = nan_filled(t.weight.size());
  conv.backward_weights(d_weight.data(), t.d_out.data(), t.in.data(), ws.data());
  ws.require_guard("created at 2 threads, run at 1");
  require_close(d_weight, ref.d_weight, ref.d_weight_abs, ref.d_weight_terms, Precision::kFp32,
                nullptr, "created at 2 threads, run at 1");
  omp_set_num_threads(2);
  d_weight = nan_filled(t.weight.size());
  conv.backward_weights(d_weight.data(), t.d_out.data(), t.in.data(), ws.data());
  ws.require_guard("back at 2 threads");
  require_close(d_weight, ref.d_weight, ref.d_weight_abs, ref.d_weight_terms, Precision::kFp32,
                nullptr, "back at 2 threads");
  omp_set_num_threads(saved);
}

TEST_CASE("oneDNN conv: the library reports its version and ISA, and bad use is refused",
          "[onednn]") {
  const auto& library = nostrum::kernels::onednn_library();
  INFO("oneDNN " << library.version << " isa " << library.isa);
  CHECK(library.version.rfind("2.", 0) == 0);
  CHECK(!library.isa.empty());
  const ConvGeometry g = geometry(1, 5, 5, 4, 4, 3, 3, 1, 1);
  CHECK_THROWS_AS(
      OnednnConv(geometry(1, 2, 2, 4, 4, 3, 3, 1, 0), ConvPass::kForward, Precision::kFp32),
      nostrum::ShapeError);
  OnednnConv forward(g, ConvPass::kForward, Precision::kFp32);
  CHECK(forward.pass() == ConvPass::kForward);
  CHECK(forward.workspace_bytes() > 0);  // the weights in oneDNN's blocked layout at least
  Workspace ws(forward);
  std::vector<float> x(100), w(144), y(100);
  CHECK_THROWS_WITH(forward.backward_data(x.data(), y.data(), w.data(), false, ws.data()),
                    Catch::Contains("backward_data on a forward object"));
  CHECK_THROWS_WITH(forward.forward(y.data(), x.data(), w.data(), nullptr),
                    Catch::Contains("without its workspace"));
}

TEST_CASE("oneDNN conv: oneDNN reaches AMX exactly where the CPU, the cap and Linux allow it",
          "[onednn]") {
  // The bf16 convolutions run on AMX tiles only through oneDNN: a cap that lowered oneDNN too far
  // (or one that failed to lower it) would show here. Linux's word on the tiles is read from Linux
  // after oneDNN has started (it asks for them itself, also where NOSTRUM_CPU_NO_BF16 kept
  // nostrum's table from asking), not from nostrum's table.
  const auto& library = nostrum::kernels::onednn_library();
  const bool amx = cpuinfo_has("amx_tile") && cpuinfo_has("amx_bf16") &&
                   nostrum::testing::cap_allows(nostrum::Isa::kAmx) && linux_permits_amx_tiles();
  INFO("oneDNN isa " << library.isa << "; " << nostrum::cpu_features().describe());
  CHECK((library.isa == "avx512_core_amx") == amx);
}

TEST_CASE("oneDNN conv: a primitive needing more than the workspace limit uses its own memory",
          "[onednn]") {
  const ConvGeometry g = geometry(2, 9, 8, 24, 40, 3, 3, 2, 1);
  std::mt19937 rng(4);
  const Tensors t = random_tensors(g, rng);
  const Reference ref(g, t);
  OnednnConv conv(g, ConvPass::kBackwardData, Precision::kFp32, /*workspace_limit=*/0);
  CHECK(conv.workspace_bytes() == 0);
  auto d_in = nan_filled(t.in.size());
  conv.backward_data(d_in.data(), t.d_out.data(), t.weight.data(), false, nullptr);
  require_close(d_in, ref.d_in, ref.d_in_abs, ref.d_in_terms, Precision::kFp32, nullptr,
                "own workspace");
}

TEST_CASE("oneDNN fp32 candidate: every pass prepared once, run at the batch and a partial one",
          "[onednn]") {
  const auto& candidate = nostrum::kernels::onednn_fp32_candidate();
  CHECK(std::string(candidate.name()) == "onednn");
  REQUIRE(candidate.available(nostrum::cpu_features()));
  CHECK_FALSE(candidate.supports(Precision::kBf16));
  check_candidate(candidate, Precision::kFp32);
}

TEST_CASE("oneDNN fp32 conv: backward-data accumulates a large batch chunk by chunk", "[onednn]") {
  check_accumulate_in_chunks(Precision::kFp32);
}

TEST_CASE(
    "oneDNN fp32 conv: backward-data hands each chunk's partial to a finisher, bit for bit the "
    "pass then the finisher",
    "[onednn]") {
  check_finisher_in_chunks(Precision::kFp32);
}
