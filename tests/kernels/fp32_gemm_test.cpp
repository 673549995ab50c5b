// nostrum's fp32 weight-gradient GEMM (kernels/fp32_gemm.hpp), C = A^T B + beta C: against a
// float64 product on shapes with every tail (rows past whole 14-row tiles and 168-row blocks,
// columns past whole 32-column strips, reductions past 256-value blocks and past a packed chunk of
// B), padded leading dimensions, beta 0 (C not read), 1 and 0.5; the same bits at 1 to 4 threads
// and inside a parallel region (each thread its own product); refused by name without AVX512F
// (NOSTRUM_MAX_ISA=avx2 in the kernels' capped run).
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/fp32_gemm.hpp"

using nostrum::kernels::fp32_gemm_available;
using nostrum::kernels::gemm_fp32_tn;

namespace {

struct Case {
  int M, N, K;
  float beta;
};

// Deterministic values in [-1, 1).
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1u;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = float(int32_t(x >> 8) - (1 << 23)) / float(1 << 23);
  }
  return v;
}

// C from gemm_fp32_tn on padded operands (lda = M + 3, ldb = N + 5, ldc = N + 7); C's start
// holds `c0` (NaN where beta is 0, so that a read of it would show).
std::vector<float> product(const Case& c, const std::vector<float>& A, const std::vector<float>& B,
                           const std::vector<float>& c0) {
  std::vector<float> C = c0;
  gemm_fp32_tn(c.M, c.N, c.K, A.data(), c.M + 3, B.data(), c.N + 5, c.beta, C.data(), c.N + 7);
  return C;
}

void check_case(const Case& c) {
  const int lda = c.M + 3, ldb = c.N + 5, ldc = c.N + 7;
  const std::vector<float> A = values(size_t(c.K) * lda, 1u + c.M);
  const std::vector<float> B = values(size_t(c.K) * ldb, 2u + c.N);
  std::vector<float> c0 = values(size_t(c.M) * ldc, 3u + c.K);
  if (c.beta == 0.0f)
    for (float& v : c0) v = std::numeric_limits<float>::quiet_NaN();
  INFO("M " << c.M << " N " << c.N << " K " << c.K << " beta " << c.beta);

  // 2, 3 and 4 threads (columns owned by the threads where the strips split evenly, else the
  // pool's row blocks), twice each: one thread's bits.
  omp_set_num_threads(1);
  const std::vector<float> one = product(c, A, B, c0);
  for (int threads : {3, 4, 2})
    for (int repeat = 0; repeat < 2; ++repeat) {
      omp_set_num_threads(threads);
      INFO("threads " << threads);
      CHECK(std::memcmp(one.data(), product(c, A, B, c0).data(), one.size() * sizeof(float)) == 0);
    }
  const std::vector<float> two = product(c, A, B, c0);

  int wrong = 0;
  for (int i = 0; i < c.M; ++i)
    for (int j = 0; j < ldc; ++j) {
      const size_t at = size_t(i) * ldc + j;
      if (j >= c.N) {  // past the columns: untouched
        if (std::memcmp(&two[at], &c0[at], sizeof(float)) != 0) ++wrong;
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int k = 0; k < c.K; ++k) {
        const double p = double(A[size_t(k) * lda + i]) * double(B[size_t(k) * ldb + j]);
        sum += p;
        magnitude += std::fabs(p);
      }
      if (c.beta != 0.0f) {
        sum += double(c.beta) * double(c0[at]);
        magnitude += std::fabs(double(c.beta) * double(c0[at]));
      }
      // fp32 sums of K + 1 terms: within (K + 1) ulps of the magnitude summed.
      const double bound = (c.K + 1) * double(std::numeric_limits<float>::epsilon()) * magnitude;
      if (!(std::fabs(double(two[at]) - sum) <= bound)) ++wrong;
    }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE(
    "the fp32 weight-gradient GEMM matches float64 on every tail, same bits at 1 to 4 "
    "threads; refused by name without AVX512F",
    "[fp32_gemm]") {
  if (!fp32_gemm_available()) {
    std::vector<float> x(64, 1.0f), y(16, 0.0f);
    try {
      gemm_fp32_tn(4, 4, 4, x.data(), 4, x.data(), 4, 0.0f, y.data(), 4);
      FAIL("gemm_fp32_tn ran without AVX512F in the table");
    } catch (const nostrum::OptionError& e) {
      CHECK(std::string(e.what()).find("AVX512F") != std::string::npos);
    }
    return;
  }
  const int threads = omp_get_max_threads();
  for (const Case& c : {Case{1, 1, 1, 0.0f}, Case{13, 31, 255, 0.0f}, Case{14, 32, 256, 1.0f},
                        Case{15, 33, 257, 0.5f}, Case{168, 64, 700, 0.0f},
                        Case{169, 100, 513, 1.0f}, Case{300, 17, 40, 0.0f},
                        // B's chunk is 256 values of the reduction at 1,000 columns: 3 chunks
                        Case{40, 1000, 600, 0.0f}, Case{64, 16, 3000, 1.0f}, Case{5, 7, 0, 0.5f},
                        // 3 and 6 strips (owned at 3 threads), a 16-wide last strip
                        Case{29, 80, 530, 0.5f}, Case{50, 176, 300, 1.0f}})
    check_case(c);
  omp_set_num_threads(threads);
}

TEST_CASE("the fp32 weight-gradient GEMM inside a parallel region: each thread its own product",
          "[fp32_gemm]") {
  if (!fp32_gemm_available()) return;  // the refusal is the test above's
  const int M = 50, N = 70, K = 900;
  const std::vector<float> A = values(size_t(K) * M, 5), B = values(size_t(K) * N, 6);
  std::vector<float> alone(size_t(M) * N);
  gemm_fp32_tn(M, N, K, A.data(), M, B.data(), N, 0.0f, alone.data(), N);
  std::vector<std::vector<float>> each(2, std::vector<float>(size_t(M) * N));
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    gemm_fp32_tn(M, N, K, A.data(), M, B.data(), N, 0.0f, each[size_t(t)].data(), N);
  }
  for (const std::vector<float>& c : each)
    CHECK(std::memcmp(c.data(), alone.data(), alone.size() * sizeof(float)) == 0);
}
