// bf16 conversion and the driver of the mixed-precision GEMM: it rounds A into 32-bit k-pair words
// (row-major, or pair-major for a transposed A), blocks the product (256 columns x 168 rows x 192
// k-pairs: the B block ~196 KB in L2, one 32-column strip of it ~24 KB in L1) and hands the blocks
// to the AVX512_BF16 tiles (bf16_avx512.cpp).
#include "nostrum/kernels/bf16.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bf16_avx512.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::kernels {

namespace {

constexpr int kPairsPerBlock = 192;
constexpr int kRowsPerBlock = 168;  // 12 register tiles of 14 rows
constexpr int kColumnsPerBlock = 256;

int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}

std::vector<uint32_t>& a_words() {
  thread_local std::vector<uint32_t> words;
  return words;
}

std::vector<uint32_t>& b_words() {
  thread_local std::vector<uint32_t> words;
  return words;
}

// [begin, end) of `count` items for part `part` of `parts`.
inline int64_t split(int64_t count, int part, int parts) {
  return count * part / parts;
}

}  // namespace

void convert_to_bf16(uint16_t* dst, const float* src, int64_t count) {
  if (cpu_features().avx512()) {
    bf16_avx512::convert(dst, src, count);
    return;
  }
  for (int64_t i = 0; i < count; ++i) dst[i] = fp32_to_bf16(src[i]);
}

const char* precision_name(Precision p) {
  return p == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  static const std::vector<std::string> names = {"fp32", "bf16"};  // Precision order
  return parse_enum_name<Precision>(name, names, "--precision");
}

bool bf16_available() {
  return cpu_features().avx512_bf16;
}

void require_bf16(const std::string& where) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_bf16) return;
  if (f.architecture != "x86_64")
    throw OptionError("bf16 precision is x86-64 only (its GEMM is AVX512_BF16 code); this " +
                          f.architecture + " build runs fp32 (" + f.describe() + ")",
                      where, "run with --precision fp32 (or auto)");
  throw OptionError(std::string("bf16 precision needs the CPU feature ") +
                        (f.avx512() ? "AVX512_BF16" : "AVX512F/AVX512BW") +
                        ", which this CPU lacks (" + f.describe() + ")",
                    where, "run with --precision fp32");
}

size_t bf16_packed_b_words(int K, int N) {
  return size_t((K + 1) / 2) * size_t(round16(N));
}

void bf16_pack_b(uint32_t* dst, Trans trans_b, const float* B, int ldb, int K, int N) {
  require_bf16("bf16_pack_b");
  const int64_t ld = round16(N);
  const int pairs = (K + 1) / 2;
  const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1;
#pragma omp parallel if (threaded)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (trans_b == Trans::kNo) {
      // op(B) = B (K x N): pairs of rows.
      const int p0 = int(split(pairs, t, nt)), p1 = int(split(pairs, t + 1, nt));
      if (p1 > p0)
        bf16_avx512::interleave_rows(dst + p0 * ld, ld, B + int64_t(2 * p0) * ldb, ldb,
                                     std::min(K, 2 * p1) - 2 * p0, N);
    } else {
      // op(B) = B^T, B stored (N x K): blocks of 16 columns of op(B) (rows of B).
      const int64_t blocks = ld / 16;
      const int64_t c0 = split(blocks, t, nt) * 16, c1 = split(blocks, t + 1, nt) * 16;
      if (c1 > c0) {
        bf16_avx512::interleave_columns(dst + c0, ld, int(c1 - c0), B + c0 * ldb, ldb,
                                        int(std::max<int64_t>(0, std::min<int64_t>(N, c1) - c0)),
                                        K);
      }
    }
  }
}

void gemm_bf16_packed(Trans trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                      const uint32_t* Bp, float beta, float* C, int ldc) {
  require_bf16("gemm_bf16");
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no products: C = beta * C
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        C[int64_t(i) * ldc + j] = beta == 0.0f ? 0.0f : beta * C[int64_t(i) * ldc + j];
    return;
  }
  const int pairs = (K + 1) / 2;
  const int64_t ldb = round16(N);
  // A's words: row-major (M, ld) for op(A) = A; pair-major (pairs, ld) for op(A) = A^T.
  const int64_t ld = trans_a == Trans::kNo ? round16(pairs) : round16(M);
  const int64_t a_rows = trans_a == Trans::kNo ? M : pairs;
  std::vector<uint32_t>& buffer = a_words();
  if (buffer.size() < size_t(a_rows * ld)) buffer.resize(size_t(a_rows * ld));
  uint32_t* words = buffer.data();
  bf16_avx512::WordsA a_all;
  a_all.a = words;
  if (trans_a == Trans::kNo) {
    a_all.row = ld, a_all.pair = 1;
  } else {
    a_all.row = 1, a_all.pair = ld;
  }

  const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1;
  const int threads = threaded ? omp_get_max_threads() : 1;
  const int64_t row_blocks = (M + kRowsPerBlock - 1) / kRowsPerBlock;
  // Enough pieces for every thread: cut the columns finer (multiples of 32) when rows are few.
  int64_t columns = kColumnsPerBlock;
  while (columns > 32 && row_blocks * ((N + columns - 1) / columns) < 2 * threads) columns /= 2;
  const int64_t column_blocks = (N + columns - 1) / columns;
  const int64_t pieces = row_blocks * column_blocks;

  auto run_piece = [&](int64_t piece) {
    const int64_t rb = piece / column_blocks, cb = piece % column_blocks;
    const int i0 = int(rb * kRowsPerBlock), i1 = std::min(M, i0 + kRowsPerBlock);
    const int j0 = int(cb * columns), j1 = int(std::min<int64_t>(N, j0 + columns));
    for (int p0 = 0; p0 < pairs; p0 += kPairsPerBlock) {
      bf16_avx512::WordsA a = a_all;
      a.a += i0 * a.row + p0 * a.pair;
      bf16_avx512::gemm_block(C + int64_t(i0) * ldc + j0, ldc, a, Bp + p0 * ldb + j0, ldb, i1 - i0,
                              j1 - j0, std::min(kPairsPerBlock, pairs - p0), alpha, beta, p0 == 0);
    }
  };

#pragma omp parallel num_threads(threads) if (threaded)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (trans_a == Trans::kNo) {
      const int64_t r0 = split(M, t, nt), r1 = split(M, t + 1, nt);
      if (r1 > r0)
        bf16_avx512::rows_to_words(words + r0 * ld, ld, A + r0 * lda, lda, int(r1 - r0), K);
    } else {
      // A stored (K x M): pairs of its rows.
      const int64_t p0 = split(pairs, t, nt), p1 = split(pairs, t + 1, nt);
      if (p1 > p0)
        bf16_avx512::interleave_rows(words + p0 * ld, ld, A + 2 * p0 * lda, lda,
                                     int(std::min<int64_t>(K, 2 * p1) - 2 * p0), M);
    }
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
    for (int64_t piece = 0; piece < pieces; ++piece) run_piece(piece);
  }
}

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  require_bf16("gemm_bf16");
  std::vector<uint32_t>& packed = b_words();
  const size_t words = bf16_packed_b_words(K, N);
  if (packed.size() < words) packed.resize(words);
  bf16_pack_b(packed.data(), trans_b, B, ldb, K, N);
  gemm_bf16_packed(trans_a, M, N, K, alpha, A, lda, packed.data(), beta, C, ldc);
}

double bf16_dot_probe_seconds(int64_t iterations) {
  require_bf16("bf16_dot_probe");
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = bf16_avx512::dot_probe(iterations);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double fp32_fma_probe_seconds(int64_t iterations) {
  NOSTRUM_CHECK(cpu_features().avx512(), OptionError, "the FMA probe needs AVX512F",
                "fp32_fma_probe");
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = bf16_avx512::fma_probe(iterations);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nostrum::kernels
