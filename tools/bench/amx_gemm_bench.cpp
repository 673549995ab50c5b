// nostrum-amx-gemm-bench: the bf16 GEMM's two engines (vdpbf16ps, AMX tiles) on a big square GEMM
// and ResNet-50 224 b32's weight-gradient shapes, at 1 and 2 threads, in GFLOP/s; then the
// registry's bf16 conv candidates (oneDNN's included) timed by the measured choice's own
// schedule on those weight-gradient passes. Operands in bf16 as a bf16 run hands them over.
// Usage: nostrum-amx-gemm-bench [--quick] [--only TEXT] (--quick: the GEMMs only, 2 repeats;
// --only: the GEMMs whose description contains TEXT, 1 thread, the AMX engine, 20 repeats, for a
// profiler); tools/bench/README.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_choice.hpp"

using namespace nostrum;
using kernels::Bf16Engine;
using kernels::Trans;

namespace {

struct Shape {
  const char* what;
  Trans ta;
  int M, N, K;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  std::printf("cpu: %s\n", cpu_features().describe().c_str());
  if (!kernels::bf16_available()) {
    std::printf("no AVX512_BF16: nothing to time\n");
    return 0;
  }
  const bool amx = kernels::bf16_amx_available();
  // C = op(A) x B: for a weight gradient A = the output gradient (K_out x pixels stored pixels x
  // K_out: trans_a), B = the input columns (pixels x C_in).
  const std::vector<Shape> shapes = {
      {"square 2048^3", Trans::kNo, 2048, 2048, 2048},
      {"1x1 wgrad layer1 C256 K64 (56x56)", Trans::kYes, 64, 256, 32 * 56 * 56},
      {"1x1 wgrad layer1 C64 K256 (56x56)", Trans::kYes, 256, 64, 32 * 56 * 56},
      {"1x1 wgrad layer4 C512 K2048 (7x7)", Trans::kYes, 2048, 512, 32 * 7 * 7},
      {"3x3 wgrad layer1 C64 K64 (56x56, im2col 576)", Trans::kYes, 64, 576, 32 * 56 * 56},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int repeats = !only.empty() ? 20 : quick ? 2 : 3;
  for (const Shape& s : shapes) {
    if (!only.empty() && std::string(s.what).find(only) == std::string::npos) continue;
    const int a_rows = s.ta == Trans::kNo ? s.M : s.K, a_cols = s.ta == Trans::kNo ? s.K : s.M;
    std::vector<uint16_t> A(size_t(a_rows) * a_cols), B(size_t(s.K) * s.N);
    for (auto& x : A) x = kernels::fp32_to_bf16(u(rng));
    for (auto& x : B) x = kernels::fp32_to_bf16(u(rng));
    std::vector<float> C(size_t(s.M) * s.N);
    const double flops = 2.0 * s.M * s.N * double(s.K);
    for (int threads : {1, 2}) {
      if (!only.empty() && threads > 1) continue;
      omp_set_num_threads(threads);
      std::printf("%-46s M%d N%d K%d ta%d, %d thread(s):", s.what, s.M, s.N, s.K, int(s.ta),
                  threads);
      for (Bf16Engine e : {Bf16Engine::kVdpbf16ps, Bf16Engine::kAmx}) {
        if ((e == Bf16Engine::kAmx && !amx) || (!only.empty() && e != Bf16Engine::kAmx)) continue;
        std::vector<double> t;
        for (int r = 0; r < repeats + 1; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          kernels::gemm_bf16(s.ta, Trans::kNo, s.M, s.N, s.K, 1.0f, A.data(), a_cols, B.data(), s.N,
                             0.0f, C.data(), s.N, e);
          const double sec =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r > 0) t.push_back(sec);  // the first call warms the buffers
        }
        const double sec = median(t);
        std::printf("  %s %.2f ms %.0f GFLOP/s", kernels::bf16_engine_name(e), sec * 1e3,
                    flops / sec * 1e-9);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (quick || !only.empty()) return 0;
  // The conv candidates on ResNet-50 224 b32's weight gradients, the operands handed over in bf16.
  const std::vector<kernels::ConvGeometry> convs = {
      {32, 56, 56, 256, 64, 1, 1, 1, 0},  {32, 56, 56, 64, 256, 1, 1, 1, 0},
      {32, 7, 7, 512, 2048, 1, 1, 1, 0},  {32, 56, 56, 64, 64, 3, 3, 1, 1},
      {32, 14, 14, 256, 256, 3, 3, 1, 1},
  };
  kernels::ConvMeasureBuffers buffers;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const kernels::ConvGeometry& g : convs) {
      kernels::ConvPassShape shape;
      shape.g = g;
      shape.pass = kernels::ConvPass::kBackwardWeights;
      shape.bf16_in = shape.bf16_d_out = true;
      const std::vector<kernels::ConvTiming> timings =
          kernels::measure_conv_pass(shape, kernels::Precision::kBf16, {}, &buffers);
      std::printf("%s backward_weights, %d thread(s):", kernels::conv_shape_name(g).c_str(),
                  threads);
      for (const kernels::ConvTiming& t : timings)
        std::printf("  %s %s%.2f ms%s", t.candidate.c_str(), t.calls == 0 ? ">" : "",
                    t.seconds * 1e3, t.calls > 0 && t.calls < 3 ? "*" : "");
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
