// The fp32 FMA register probe on ymm registers (fma_probe_avx2.hpp): 24 independent chains, enough
// to cover a 4-cycle FMA latency on two pipes.
#include "fma_probe_avx2.hpp"

#include <immintrin.h>

#include <chrono>

namespace nostrum::kernels::avx2 {

namespace {

float fma_chains(int64_t iterations) {
  constexpr int kChains = 24;
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(1.0f), b = _mm256_set1_ps(0x1p-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

}  // namespace

double fma_probe_seconds(int64_t iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = fma_chains(iterations);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nostrum::kernels::avx2
