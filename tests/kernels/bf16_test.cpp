// bf16 conversion (round to nearest even against an independent float64 rule, NaN, inf,
// denormals; the AVX-512 loop bit-identical to the scalar one), and the mixed-precision GEMM
// against float64 references on odd shapes, all four transpose cases, alpha/beta, on both engines
// (vdpbf16ps; AMX tiles, tagged [amx]: reported skipped where AMX is not available) (CPU feature
// detection: tests/core/cpu_features_test.cpp). Row-major matrices throughout.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/im2col.hpp"

using nostrum::kernels::bf16_to_fp32;
using nostrum::kernels::Bf16Engine;
using nostrum::kernels::fp32_to_bf16;
using nostrum::kernels::Trans;

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// Independent rule: the two bf16 neighbours of x (truncation and one ulp further from zero),
// the nearer in float64 wins, a tie goes to the even significand; past the largest finite
// (0x7f7f) the upper neighbour is inf, which IEEE rounding gives when x >= 0x7f7f8000's value.
uint16_t reference_round(uint32_t u) {
  const uint16_t down = uint16_t(u >> 16), up = uint16_t(down + 1);
  const double x = from_bits(u);
  const double d_down = std::fabs(x - double(bf16_to_fp32(down)));
  // Up may be the inf pattern (0x7f80 / 0xff80): treat it as 2^128 for the distance.
  const bool up_is_inf = (up & 0x7fff) == 0x7f80;
  const double up_value = up_is_inf ? std::copysign(std::ldexp(1.0, 128), x) : bf16_to_fp32(up);
  const double d_up = std::fabs(x - up_value);
  if (d_down < d_up) return down;
  if (d_up < d_down) return up;
  return (down & 1) ? up : down;
}

std::vector<uint32_t> low_halves() {
  return {0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xc000, 0xfffe, 0xffff};
}

}  // namespace

TEST_CASE("fp32_to_bf16 rounds to nearest even on every upper half, NaN stays NaN",
          "[bf16][any-cpu]") {
  int64_t checked = 0;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : low_halves()) {
      const uint32_t u = (hi << 16) | lo;
      const uint16_t got = fp32_to_bf16(from_bits(u));
      const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
      if (nan) {
        // NaN stays NaN, quiet, same sign.
        REQUIRE(std::isnan(bf16_to_fp32(got)));
        REQUIRE((got & 0x0040) != 0);
        REQUIRE((got & 0x8000) == (hi & 0x8000));
      } else if ((u & 0x7fffffffu) == 0x7f800000u) {
        REQUIRE(got == uint16_t(hi));  // +-inf
      } else if (got != reference_round(u)) {
        FAIL("bits " << std::hex << u << ": got " << got << " want " << reference_round(u));
      }
      ++checked;
    }
  REQUIRE(checked == 65536 * int64_t(low_halves().size()));
  // Spot values: ties to even, overflow to inf, the smallest denormal (not flushed).
  CHECK(fp32_to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // tie, even stays
  CHECK(fp32_to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // tie, odd rounds up
  CHECK(fp32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);  // largest float -> inf
  CHECK(fp32_to_bf16(from_bits(0x00010000u)) == 0x0001);  // denormal kept
  CHECK(fp32_to_bf16(-0.0f) == 0x8000);
}

TEST_CASE("convert_to_bf16 (AVX-512) is bit-identical to the scalar rule, every tail",
          "[bf16][any-cpu]") {
  std::vector<float> src;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : low_halves()) src.push_back(from_bits((hi << 16) | lo));
  for (int64_t count : {int64_t(src.size()), int64_t(1), int64_t(31), int64_t(33), int64_t(47)}) {
    std::vector<uint16_t> dst(size_t(count) + 8, 0xabcd);
    nostrum::kernels::convert_to_bf16(dst.data(), src.data() + 5, count);
    for (int64_t i = 0; i < count; ++i)
      if (dst[size_t(i)] != fp32_to_bf16(src[size_t(i) + 5])) FAIL("element " << i);
    for (size_t i = size_t(count); i < dst.size(); ++i) REQUIRE(dst[i] == 0xabcd);  // no overrun
  }
}

TEST_CASE("parse_precision takes fp32 and bf16 only", "[bf16][any-cpu]") {
  using nostrum::kernels::Precision;
  CHECK(nostrum::kernels::parse_precision("fp32") == Precision::kFp32);
  CHECK(nostrum::kernels::parse_precision("bf16") == Precision::kBf16);
  CHECK_THROWS(nostrum::kernels::parse_precision("fp16"));
}

namespace {

// Tolerances of one output c = sum_i a_i b_i (i < K), with S = sum_i |a_i b_i|:
//  * against float64 on the bf16-ROUNDED operands: the products of two 8-bit significands are
//    exact in fp32, so the only error is fp32 accumulation: K - 1 pair sums inside the chain plus
//    the sums of the k-blocks into C (fewer than K / 384 + 2), each at most 2^-24 relative of a
//    partial sum <= S: |err| <= (K + 2) * 2^-24 * S (first order; the 2 also covers alpha).
//  * against float64 on the fp32 operands: each operand rounded to bf16 moves by at most
//    u = 2^-8 relative (half an ulp of an 8-bit significand, 2^-7 at 1.0), so each product by at
//    most 2u + u^2 = 2^-7 + 2^-16: |err| <= (2 * 2^-8 + 2^-16 + (K + 2) * 2^-24) * S.
struct Check {
  double rounded_max = 0, full_max = 0;  // worst err / bound seen (must stay <= 1)
};

void check_gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, float beta, std::mt19937& rng,
                Check& worst, Bf16Engine engine = Bf16Engine::kVdpbf16ps) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int lda = (ta == Trans::kNo ? K : M) + 3, ldb = (tb == Trans::kNo ? N : K) + 1;
  const int ldc = N + 2;
  const int a_rows = ta == Trans::kNo ? M : K, b_rows = tb == Trans::kNo ? K : N;
  std::vector<float> A(size_t(a_rows) * lda), B(size_t(b_rows) * ldb), C(size_t(M) * ldc);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  for (auto& x : C) x = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  const std::vector<float> C0 = C;
  auto a = [&](int i, int k) {
    return A[ta == Trans::kNo ? size_t(i) * lda + k : size_t(k) * lda + i];
  };
  auto b = [&](int k, int j) {
    return B[tb == Trans::kNo ? size_t(k) * ldb + j : size_t(j) * ldb + k];
  };
  nostrum::kernels::gemm_bf16(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(),
                              ldc, engine);
  const double u24 = std::ldexp(1.0, -24);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double rounded = 0, full = 0, S = 0;
      for (int k = 0; k < K; ++k) {
        rounded += double(nostrum::kernels::round_to_bf16(a(i, k))) *
                   nostrum::kernels::round_to_bf16(b(k, j));
        full += double(a(i, k)) * b(k, j);
        S += std::fabs(double(a(i, k)) * b(k, j));
      }
      const double c0 = beta == 0.0f ? 0.0 : double(beta) * C0[size_t(i) * ldc + j];
      const double got = C[size_t(i) * ldc + j];
      const double scale = std::fabs(alpha) * S;
      const double slack = std::fabs(c0) * 2 * u24 + 1e-30;  // the beta term's own roundings
      const double bound_rounded = (K + 2) * u24 * scale + slack;
      const double bound_full =
          (2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + (K + 2) * u24) * scale + slack;
      const double e_rounded = std::fabs(got - (alpha * rounded + c0));
      const double e_full = std::fabs(got - (alpha * full + c0));
      worst.rounded_max = std::max(worst.rounded_max, e_rounded / bound_rounded);
      worst.full_max = std::max(worst.full_max, e_full / bound_full);
      if (!(e_rounded <= bound_rounded && e_full <= bound_full))
        FAIL(nostrum::kernels::bf16_engine_name(engine)
             << " M" << M << " N" << N << " K" << K << " ta" << int(ta) << " tb" << int(tb) << " ("
             << i << "," << j << "): got " << got << " rounded-ref " << alpha * rounded + c0
             << " (err " << e_rounded << " > " << bound_rounded << "?) full-ref "
             << alpha * full + c0 << " (err " << e_full << " > " << bound_full << "?)");
    }
    for (int j = N; j < ldc; ++j)  // the padding columns of C are never written
      if (!(std::isnan(C[size_t(i) * ldc + j]) && std::isnan(C0[size_t(i) * ldc + j])) &&
          C[size_t(i) * ldc + j] != C0[size_t(i) * ldc + j])
        FAIL("wrote past N at row " << i);
  }
}

}  // namespace

TEST_CASE("gemm_bf16 matches float64 within the bf16 bound, odd shapes, all transposes", "[bf16]") {
  std::mt19937 rng(14);
  Check worst;
  // 1 thread, and 2 (the row blocks and column pieces shared out): M past one 168-row block and
  // not a multiple of the 14- or 24-row tiles, N past one 32-column strip with a 16-wide last
  // one, K odd and past one 192-pair block.
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Trans ta : {Trans::kNo, Trans::kYes})
      for (Trans tb : {Trans::kNo, Trans::kYes})
        for (int M : {1, 13, 15, 29, 170})
          for (int N : {1, 7, 16, 17, 33, 40})
            for (int K : {1, 2, 3, 17, 64, 385, 800}) {
              if (M * N * K > 2000000) continue;
              check_gemm(ta, tb, M, N, K, 1.0f, 0.0f, rng, worst);
            }
    // alpha, beta, and a shape with several row, column and k blocks.
    check_gemm(Trans::kNo, Trans::kYes, 37, 19, 21, 0.5f, 1.0f, rng, worst);
    check_gemm(Trans::kYes, Trans::kNo, 18, 9, 33, -2.0f, 0.25f, rng, worst);
    check_gemm(Trans::kNo, Trans::kNo, 339, 270, 401, 1.0f, 0.0f, rng, worst);
    check_gemm(Trans::kYes, Trans::kNo, 64, 147, 403, 1.0f, 1.0f, rng, worst);  // stem's bwd-w
  }
  INFO("worst err/bound: rounded operands " << worst.rounded_max << ", fp32 operands "
                                            << worst.full_max);
  CHECK(worst.rounded_max <= 1.0);
  CHECK(worst.full_max <= 1.0);
  // The bf16 bound is not vacuous: rounding to bf16 really moved the results (an fp32 GEMM in
  // disguise would sit near 2^-24, i.e. a ratio below 1e-3 here).
  CHECK(worst.full_max > 0.01);
}

TEST_CASE("gemm_bf16 with packed B reuses the pack, K = 0 scales C by beta", "[bf16]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int M = 20, N = 24, K = 9;
  std::vector<float> A(size_t(M) * K), B(size_t(N) * K), C1(size_t(M) * N), C2(size_t(M) * N);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  std::vector<uint32_t> packed(nostrum::kernels::bf16_packed_b_words(K, N));
  nostrum::kernels::bf16_pack_b(packed.data(), Trans::kYes, B.data(), K, K, N);
  nostrum::kernels::gemm_bf16_packed(Trans::kNo, M, N, K, 1.0f, A.data(), K, packed.data(), 0.0f,
                                     C1.data(), N);
  nostrum::kernels::gemm_bf16(Trans::kNo, Trans::kYes, M, N, K, 1.0f, A.data(), K, B.data(), K,
                              0.0f, C2.data(), N);
  CHECK(C1 == C2);
  std::vector<float> C3(size_t(M) * N, 2.0f);
  nostrum::kernels::gemm_bf16(Trans::kNo, Trans::kNo, M, N, 0, 1.0f, A.data(), 1, B.data(), N, 0.5f,
                              C3.data(), N);
  for (float c : C3) REQUIRE(c == 1.0f);
}

TEST_CASE("gemm_bf16 packs a wide B in chunks of k: the same bits as one pack, beta once",
          "[bf16]") {
  // N = 5500: one 192-pair block of B is over a chunk (256 K words), so gemm_bf16 packs 384 k per
  // chunk and K = 801 takes three chunks (the last one odd).
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int M = 5, N = 5500, K = 801;
  std::vector<float> A(size_t(K) * M), B(size_t(K) * N), C0(size_t(M) * N);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  for (auto& x : C0) x = u(rng);
  std::vector<uint32_t> packed(nostrum::kernels::bf16_packed_b_words(K, N));
  nostrum::kernels::bf16_pack_b(packed.data(), Trans::kNo, B.data(), N, K, N);
  std::vector<float> C1 = C0, C2 = C0;
  nostrum::kernels::gemm_bf16_packed(Trans::kYes, M, N, K, 1.0f, A.data(), M, packed.data(), 0.5f,
                                     C1.data(), N);
  nostrum::kernels::gemm_bf16(Trans::kYes, Trans::kNo, M, N, K, 1.0f, A.data(), M, B.data(), N,
                              0.5f, C2.data(), N);
  CHECK(C1 == C2);
  Check worst;
  check_gemm(Trans::kYes, Trans::kNo, M, N, K, 1.0f, 0.5f, rng, worst);
  check_gemm(Trans::kNo, Trans::kYes, 3, N, 1001, -1.0f, 0.0f, rng, worst);
  CHECK(worst.rounded_max <= 1.0);
  CHECK(worst.full_max <= 1.0);
}

TEST_CASE("gemm_bf16 gives one thread's bits on 2, 3 and 4 threads, columns owned or not",
          "[bf16]") {
  // With as many 32-column strips as a multiple of the threads, each thread packs and multiplies
  // its own columns (chunk after chunk of k, beta on the first only); otherwise, and with B
  // packed beforehand, the row blocks and column pieces are shared out. Either way every C value
  // sums its k in one order: the bits of one thread. Shapes: a weight gradient's (A^T and B in
  // bf16, several chunks, 64 strips), 33 strips with a 16-wide last one (owned at 3 threads), 2 and
  // 3 strips, fp32 B^T; C with a NaN-padded ldc (columns past N never written) and beta 0.5.
  struct Shape {
    Trans ta, tb;
    int M, N, K;
    bool bf16;
  };
  const Shape shapes[] = {{Trans::kYes, Trans::kNo, 70, 2048, 1000, true},
                          {Trans::kYes, Trans::kNo, 33, 1040, 801, true},
                          {Trans::kNo, Trans::kNo, 5, 64, 385, true},
                          {Trans::kNo, Trans::kYes, 17, 96, 500, false},
                          {Trans::kYes, Trans::kYes, 40, 1040, 900, false}};
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Shape& s : shapes) {
    const int ldc = s.N + 3;
    std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.K) * s.N), C0(size_t(s.M) * ldc, nan);
    for (auto& x : A) x = u(rng);
    for (auto& x : B) x = u(rng);
    for (int i = 0; i < s.M; ++i)
      for (int j = 0; j < s.N; ++j) C0[size_t(i) * ldc + j] = u(rng);
    std::vector<uint16_t> A16(A.size()), B16(B.size());
    nostrum::kernels::convert_to_bf16(A16.data(), A.data(), int64_t(A.size()));
    nostrum::kernels::convert_to_bf16(B16.data(), B.data(), int64_t(B.size()));
    const int lda = s.ta == Trans::kNo ? s.K : s.M, ldb = s.tb == Trans::kNo ? s.N : s.K;
    // B unpacked (packed by gemm_bf16 chunk by chunk) or packed whole beforehand.
    std::vector<uint32_t> packed(nostrum::kernels::bf16_packed_b_words(s.K, s.N));
    if (s.bf16)
      nostrum::kernels::bf16_pack_b(packed.data(), s.tb, B16.data(), ldb, s.K, s.N);
    else
      nostrum::kernels::bf16_pack_b(packed.data(), s.tb, B.data(), ldb, s.K, s.N);
    const auto product = [&](int threads, bool prepacked) {
      omp_set_num_threads(threads);
      std::vector<float> C = C0;
      if (prepacked && s.bf16)
        nostrum::kernels::gemm_bf16_packed(s.ta, s.M, s.N, s.K, 1.0f, A16.data(), lda,
                                           packed.data(), 0.5f, C.data(), ldc);
      else if (prepacked)
        nostrum::kernels::gemm_bf16_packed(s.ta, s.M, s.N, s.K, 1.0f, A.data(), lda, packed.data(),
                                           0.5f, C.data(), ldc);
      else if (s.bf16)
        nostrum::kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A16.data(), lda, B16.data(),
                                    ldb, 0.5f, C.data(), ldc);
      else
        nostrum::kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb,
                                    0.5f, C.data(), ldc);
      return C;
    };
    const std::vector<float> one = product(1, false);
    REQUIRE(std::count_if(one.begin(), one.end(), [](float c) { return std::isnan(c); }) ==
            int64_t(s.M) * 3);  // the padding only
    // Each thread count four times: threads that run unsynchronised show a race only sometimes.
    for (int threads : {1, 2, 3, 4})
      for (int repeat = 0; repeat < 4; ++repeat)
        for (bool prepacked : {false, true}) {
          if (threads == 1 && (repeat > 0 || !prepacked)) continue;  // one's own bits
          const std::vector<float> many = product(threads, prepacked);
          int64_t differ = 0;
          for (size_t i = 0; i < one.size(); ++i)
            differ += std::memcmp(&one[i], &many[i], sizeof(float)) != 0;
          INFO("M" << s.M << " N" << s.N << " K" << s.K << " threads " << threads
                   << (prepacked ? " B packed beforehand" : ""));
          CHECK(differ == 0);
        }
  }
  omp_set_num_threads(2);
}

namespace {

// A and B already in bf16 (a bf16 output gradient, the backward passes' A; bf16 activations, the
// weight gradient's B) are taken as they are; the fp32 call rounds its operands, which changes
// nothing for values that are bf16 already: the same bits, on either engine. Odd K (a high half
// of zero), K past one 192-pair block, M past one 168-row block, N past a strip with a 16-wide
// last one, lda and ldb padded with NaN (a loop or tile that reads past a row shows), both A
// layouts, 1 and 2 threads, packed and unpacked B.
void check_bf16_operands_give_fp32_bits(Bf16Engine engine, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto to_bf16 = [](const std::vector<float>& x, std::vector<float>* widened) {
    std::vector<uint16_t> h(x.size());
    nostrum::kernels::convert_to_bf16(h.data(), x.data(), int64_t(x.size()));
    widened->resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) (*widened)[i] = nostrum::kernels::bf16_to_fp32(h[i]);
    return h;
  };
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Trans ta : {Trans::kNo, Trans::kYes})
      for (int M : {1, 15, 170})
        for (int K : {1, 3, 64, 385, 801})
          for (int N : {17, 40}) {
            const int lda = (ta == Trans::kNo ? K : M) + 3, ldb = N + 1;
            const int a_rows = ta == Trans::kNo ? M : K, a_cols = ta == Trans::kNo ? K : M;
            std::vector<float> A(size_t(a_rows) * lda), B(size_t(K) * ldb);
            for (size_t i = 0; i < A.size(); ++i) A[i] = int(i % lda) < a_cols ? u(rng) : nan;
            for (size_t i = 0; i < B.size(); ++i) B[i] = int(i % ldb) < N ? u(rng) : nan;
            std::vector<float> Aw, Bw;
            const std::vector<uint16_t> A16 = to_bf16(A, &Aw), B16 = to_bf16(B, &Bw);
            std::vector<uint32_t> packed(nostrum::kernels::bf16_packed_b_words(K, N)),
                packed16(packed.size());
            nostrum::kernels::bf16_pack_b(packed.data(), Trans::kNo, Bw.data(), ldb, K, N);
            nostrum::kernels::bf16_pack_b(packed16.data(), Trans::kNo, B16.data(), ldb, K, N);
            INFO("M" << M << " N" << N << " K" << K << " ta" << int(ta) << " threads " << threads);
            REQUIRE(packed == packed16);
            const std::vector<float> C0(size_t(M) * N, 0.25f);
            std::vector<float> want = C0;
            nostrum::kernels::gemm_bf16_packed(ta, M, N, K, 1.0f, Aw.data(), lda, packed.data(),
                                               1.0f, want.data(), N, engine);
            REQUIRE(want != C0);
            for (float x : want) REQUIRE(std::isfinite(x));
            std::vector<float> got = C0;
            nostrum::kernels::gemm_bf16_packed(ta, M, N, K, 1.0f, A16.data(), lda, packed.data(),
                                               1.0f, got.data(), N, engine);
            REQUIRE(got == want);
            got = C0;
            nostrum::kernels::gemm_bf16(ta, Trans::kNo, M, N, K, 1.0f, A16.data(), lda, Bw.data(),
                                        ldb, 1.0f, got.data(), N, engine);
            REQUIRE(got == want);
            got = C0;
            nostrum::kernels::gemm_bf16(ta, Trans::kNo, M, N, K, 1.0f, Aw.data(), lda, B16.data(),
                                        ldb, 1.0f, got.data(), N, engine);
            REQUIRE(got == want);
            got = C0;
            nostrum::kernels::gemm_bf16(ta, Trans::kNo, M, N, K, 1.0f, A16.data(), lda, B16.data(),
                                        ldb, 1.0f, got.data(), N, engine);
            REQUIRE(got == want);
          }
  }
}

}  // namespace

TEST_CASE("gemm_bf16 on operands already in bf16: the same bits as on their values in fp32",
          "[bf16]") {
  check_bf16_operands_give_fp32_bits(Bf16Engine::kVdpbf16ps, 23);
  std::vector<uint16_t> B16(8);
  std::vector<uint32_t> packed(nostrum::kernels::bf16_packed_b_words(2, 4));
  CHECK_THROWS_AS(nostrum::kernels::bf16_pack_b(packed.data(), Trans::kYes, B16.data(), 2, 2, 4),
                  nostrum::ShapeError);
}

TEST_CASE("im2col_nhwc on bf16 values: the fp32 columns' values, padding 0", "[bf16][any-cpu]") {
  nostrum::kernels::PatchShape s;
  s.N = 2, s.H = 5, s.W = 4, s.C = 3, s.R = 3, s.S = 3, s.stride = 2, s.pad = 1;
  s.P = (s.H + 2 * s.pad - s.R) / s.stride + 1, s.Q = (s.W + 2 * s.pad - s.S) / s.stride + 1;
  std::vector<float> in(size_t(s.N) * s.H * s.W * s.C);
  for (size_t i = 0; i < in.size(); ++i) in[i] = nostrum::kernels::round_to_bf16(0.37f * i - 5);
  std::vector<uint16_t> in16(in.size());
  for (size_t i = 0; i < in.size(); ++i) in16[i] = nostrum::kernels::fp32_to_bf16(in[i]);
  const int64_t rows = s.rows(), L = s.row_length();
  std::vector<float> col(size_t(rows * L), -1.0f);
  std::vector<uint16_t> col16(col.size(), 0xffff);
  // Two calls over [1, 3) and [3, rows): a row range that does not start at 0.
  nostrum::kernels::im2col_nhwc(col.data(), in.data(), s, 1, rows);
  nostrum::kernels::im2col_nhwc(col16.data(), in16.data(), s, 1, 3);
  nostrum::kernels::im2col_nhwc(col16.data() + 2 * L, in16.data(), s, 3, rows);
  for (int64_t i = 0; i < (rows - 1) * L; ++i) {
    INFO("column value " << i);
    REQUIRE(nostrum::kernels::bf16_to_fp32(col16[i]) == col[i]);
  }
  CHECK(std::count(col.begin(), col.begin() + (rows - 1) * L, 0.0f) > 0);  // padding seen
}

TEST_CASE("bf16_pack_b of B^T equals the pack of the transpose, bit for bit", "[bf16]") {
  // The transposed pack reads rows of B (N x K) and transposes words in registers, 16 columns x 16
  // pairs at a time: N and K around those blocks and a 16-wide last strip, odd K, a padded ldb.
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int N : {1, 15, 16, 17, 33, 48, 70})
      for (int K : {1, 2, 31, 32, 33, 65, 401}) {
        const int ldb = K + 5;
        std::vector<float> B(size_t(N) * ldb), T(size_t(K) * N);
        for (auto& x : B) x = u(rng);
        for (int j = 0; j < N; ++j)
          for (int k = 0; k < K; ++k) T[size_t(k) * N + j] = B[size_t(j) * ldb + k];
        std::vector<uint32_t> from_rows(nostrum::kernels::bf16_packed_b_words(K, N), 7),
            from_columns(from_rows.size(), 9);
        nostrum::kernels::bf16_pack_b(from_rows.data(), Trans::kNo, T.data(), N, K, N);
        nostrum::kernels::bf16_pack_b(from_columns.data(), Trans::kYes, B.data(), ldb, K, N);
        INFO("N " << N << " K " << K << " threads " << threads);
        REQUIRE(from_columns == from_rows);
      }
  }
}

// ---- the AMX engine (tagged [amx]: bf16_main.cpp reports these skipped where AMX is missing) ----

TEST_CASE(
    "gemm_bf16 on AMX tiles matches float64 within the bf16 bound, odd shapes, all transposes",
    "[bf16][amx]") {
  std::mt19937 rng(15);
  Check worst;
  // 1 and 2 threads; M around the 16-row tiles and the 160-row AMX blocks (1, 15, 17, 33, 170,
  // 333), N around the 16-column tiles and 32-column strips, K odd, below one 16-pair tile and
  // not a multiple of 32.
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (Trans ta : {Trans::kNo, Trans::kYes})
      for (Trans tb : {Trans::kNo, Trans::kYes})
        for (int M : {1, 15, 17, 33, 170, 333})
          for (int N : {1, 7, 16, 17, 33, 40, 70})
            for (int K : {1, 2, 3, 31, 33, 64, 385, 801}) {
              if (int64_t(M) * N * K > 2000000) continue;
              check_gemm(ta, tb, M, N, K, 1.0f, 0.0f, rng, worst, Bf16Engine::kAmx);
            }
    // alpha, beta (overwrite with beta, then += over the later k-blocks).
    check_gemm(Trans::kNo, Trans::kYes, 37, 19, 21, 0.5f, 1.0f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kYes, Trans::kNo, 18, 9, 33, -2.0f, 0.25f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kYes, Trans::kNo, 50, 45, 803, 0.75f, -0.5f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kNo, Trans::kNo, 339, 270, 401, 1.0f, 0.0f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kYes, Trans::kNo, 64, 147, 403, 1.0f, 1.0f, rng, worst, Bf16Engine::kAmx);
    // K past one 1024-pair AMX block (the later blocks add into C), at both A layouts.
    check_gemm(Trans::kYes, Trans::kNo, 170, 70, 2100, 1.0f, 0.5f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kNo, Trans::kYes, 33, 17, 4501, 2.0f, 0.0f, rng, worst, Bf16Engine::kAmx);
    // K past one 1 MiB chunk of packed B (N = 40: 10240 k a chunk on AMX), so gemm_bf16 packs
    // twice and the second chunk adds into C.
    check_gemm(Trans::kYes, Trans::kNo, 21, 40, 11001, 1.0f, 0.5f, rng, worst, Bf16Engine::kAmx);
    check_gemm(Trans::kNo, Trans::kYes, 17, 40, 10753, -1.0f, 0.0f, rng, worst, Bf16Engine::kAmx);
  }
  INFO("worst err/bound: rounded operands " << worst.rounded_max << ", fp32 operands "
                                            << worst.full_max);
  CHECK(worst.rounded_max <= 1.0);
  CHECK(worst.full_max <= 1.0);
  CHECK(worst.full_max > 0.01);  // bf16 rounding visible: not an fp32 GEMM in disguise
}

TEST_CASE("gemm_bf16 on AMX tiles: bf16 operands give the fp32 call's bits, packed B reused",
          "[bf16][amx]") {
  check_bf16_operands_give_fp32_bits(Bf16Engine::kAmx, 29);
}

TEST_CASE("the AMX engine is there exactly where the table has AMX and refused by name elsewhere",
          "[bf16]") {
  // The table honours NOSTRUM_MAX_ISA (avx512_bf16 clears AMX: the CTest
  // bf16_amx_off_under_max_isa_avx512_bf16 runs this case so) and NOSTRUM_CPU_NO_BF16.
  const nostrum::CpuFeatures& f = nostrum::cpu_features();
  const bool amx = f.avx512_bf16 && f.amx_tile && f.amx_bf16 && f.amx_permitted;
  CHECK(nostrum::kernels::bf16_amx_available() == amx);
  for (const char* name : {"gemm_bf16_amx", "gemm_bf16_amx_per_thread"}) {
    const nostrum::kernels::ConvCandidate* c = nostrum::kernels::find_conv_candidate(name);
    REQUIRE(c != nullptr);
    INFO(name);
    CHECK(c->available(f) == amx);
  }
  if (const char* cap = std::getenv("NOSTRUM_MAX_ISA"); cap && std::string(cap) != "amx")
    CHECK_FALSE(nostrum::kernels::bf16_amx_available());
  if (amx) return;
  std::vector<float> A(4, 1.0f), B(4, 1.0f), C(4, 0.0f);
  try {
    nostrum::kernels::gemm_bf16(Trans::kNo, Trans::kNo, 2, 2, 2, 1.0f, A.data(), 2, B.data(), 2,
                                0.0f, C.data(), 2, Bf16Engine::kAmx);
    FAIL("the AMX engine ran without AMX");
  } catch (const nostrum::OptionError& e) {
    CHECK_THAT(e.what(), Catch::Contains("AMX_TILE, AMX_BF16"));
  }
}
