// The driver of nostrum's fp32 weight-gradient GEMM (kernels/fp32_gemm.hpp): B packed a chunk of
// the reduction at a time (about 1 MiB) in 32-column strips, C cut into row blocks of at most 168
// rows (and column groups where the threads need more pieces), each piece run 256 values of the
// reduction at a time by the AVX-512F tiles (fp32_gemm_avx512.cpp), which read A where it is.
// Where the strips split evenly between the threads, each thread packs and multiplies its own.
#include "nostrum/kernels/fp32_gemm.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "fp32_gemm_avx512.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "owned_columns.hpp"

namespace nostrum::kernels {

namespace {

using fp32_avx512::kBlockK;
using fp32_avx512::kBlockRows;
using fp32_avx512::kStrip;

// The calling thread's B chunk: every call writes what it reads, so a larger call replaces the
// buffer without copying or zeroing the old one.
float* b_chunk(size_t floats) {
  thread_local PageBuffer buffer;
  buffer.reserve(floats * sizeof(float), "fp32 GEMM B chunk");
  return static_cast<float*>(buffer.data());
}

}  // namespace

bool fp32_gemm_available() {
  return cpu_features().avx512f;
}

void gemm_fp32_tn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc) {
  NOSTRUM_CHECK(fp32_gemm_available(), OptionError,
                "nostrum's fp32 GEMM needs AVX512F (" + cpu_features().describe() + ")",
                "gemm_fp32_tn", "use OpenBLAS's SGEMM (the gemm_openblas candidates)");
  note_dispatch(DispatchSite::kFp32Gemm, Isa::kAvx512);
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_matrix(M, N, beta, C, ldc);  // no products
  const int strips = (N + kStrip - 1) / kStrip;
  if (omp_in_parallel() || omp_get_max_threads() == 1) {
    // One thread (also each thread of a per-thread conv): B packed just before its tiles read it,
    // a block of the reduction and a group of strips at a time (at most 256 KB, in L2), so that
    // the tiles find it cached; C's values sum their blocks in the same order as below.
    constexpr int kGroupStrips = 8;
    float* packed = b_chunk(size_t(kBlockK) * kStrip * std::min(strips, kGroupStrips));
    for (int kb = 0; kb < K; kb += kBlockK) {
      const int kk = std::min(kBlockK, K - kb);
      for (int s0 = 0; s0 < strips; s0 += kGroupStrips) {
        const int j0 = s0 * kStrip, n = std::min(N - j0, kGroupStrips * kStrip);
        const int group = (n + kStrip - 1) / kStrip;
        fp32_avx512::pack_b(packed, B + int64_t(kb) * ldb + j0, ldb, kk, n, 0, group);
        fp32_avx512::block(C + j0, ldc, A + int64_t(kb) * lda, lda, packed, int64_t(kk) * kStrip, M,
                           n, kk, beta, kb == 0);
      }
    }
    return;
  }
  const int threads = omp_get_max_threads();
  if (strips_split_evenly(N, kStrip, threads)) {
    // Threads own columns (owned_columns.hpp): each runs the one-thread product above on its
    // strips, packing its own B and writing its own C (the pool below packs by strips and
    // multiplies by rows, handing cache lines between cores).
    for_owned_columns(N, kStrip, threads, [&](int j0, int n, int) {
      gemm_fp32_tn(M, n, K, A, lda, B + j0, ldb, beta, C + j0, ldc);
    });
    return;
  }
  // The pool: row blocks of at most kBlockRows, as many as a multiple of the threads, of one
  // height.
  int64_t row_blocks = (M + kBlockRows - 1) / kBlockRows;
  row_blocks = (row_blocks + threads - 1) / threads * threads;
  const int block_rows = int((M + row_blocks - 1) / row_blocks);
  row_blocks = (M + block_rows - 1) / block_rows;
  // All strips in one piece unless the rows give too few pieces for the threads.
  int strips_per_piece = strips;
  while (strips_per_piece > 1 &&
         row_blocks * ((strips + strips_per_piece - 1) / strips_per_piece) < 2 * threads)
    strips_per_piece = (strips_per_piece + 1) / 2;
  const int64_t column_groups = (strips + strips_per_piece - 1) / strips_per_piece;
  const int64_t pieces = row_blocks * column_groups;
  // B packed a chunk of whole k-blocks at a time, about 2^18 floats.
  const int chunk = kBlockK * std::max(1, (1 << 18) / (kBlockK * strips * kStrip));
  float* packed = b_chunk(size_t(strips) * kStrip * std::min(chunk, K));

  for (int k0 = 0; k0 < K; k0 += chunk) {
    const int k = std::min(chunk, K - k0);
    const float* b = B + int64_t(k0) * ldb;
    const float* a = A + int64_t(k0) * lda;
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int s0 = int(int64_t(strips) * t / nt), s1 = int(int64_t(strips) * (t + 1) / nt);
      if (s1 > s0) fp32_avx512::pack_b(packed, b, ldb, k, N, s0, s1);
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
      for (int64_t piece = 0; piece < pieces; ++piece) {
        const int i0 = int(piece / column_groups) * block_rows;
        const int rows = std::min(M - i0, block_rows);
        const int first_strip = int(piece % column_groups) * strips_per_piece;
        const int j0 = first_strip * kStrip;
        const int n = std::min(N - j0, strips_per_piece * kStrip);
        for (int kb = 0; kb < k; kb += kBlockK) {
          const int kk = std::min(kBlockK, k - kb);
          fp32_avx512::block(C + int64_t(i0) * ldc + j0, ldc, a + int64_t(kb) * lda + i0, lda,
                             packed + int64_t(first_strip) * k * kStrip + int64_t(kb) * kStrip,
                             int64_t(k) * kStrip, rows, n, kk, beta, k0 == 0 && kb == 0);
        }
      }
    }
  }
}

}  // namespace nostrum::kernels
