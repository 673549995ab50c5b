// The AVX-512F loops of nostrum's fp32 weight-gradient GEMM (src/kernels/fp32_gemm.cpp drives
// them). Private to src/kernels: fp32_gemm_avx512.cpp is compiled with -mavx512f -mfma and holds
// nothing but these loops; the driver calls them only after checking the CPU features table.
#pragma once

#include <cstdint>

namespace nostrum::kernels::fp32_avx512 {

// B is packed in strips of 32 columns: strip s holds rows [0, k) x its 32 columns contiguously
// (row after row, 32 floats each, zero past the last column), so a tile's B operand for one k is
// two aligned-size loads from one pointer.
constexpr int kStrip = 32;
// A block: at most kBlockRows rows of C (M) x kBlockK values of the reduction (B's part of it,
// 32 KB a strip, stays in L1 while the block's tiles read it).
constexpr int kBlockRows = 168;  // 12 tiles of 14 rows
constexpr int kBlockK = 256;

// Packs rows [0, k) of B (row-major, ldb) into the strips [s0, s1) of dst: strip s at
// dst + s * k * kStrip; columns at and past n are zero.
void pack_b(float* dst, const float* B, int64_t ldb, int k, int n, int s0, int s1);

// C (rows x n, ldc) = sum over kk < k of a[kk * lda + i] * b[kk][j], added to C unless `first`,
// where C becomes that sum plus beta * C (beta 0: C is not read). a: A's block where A is (k rows
// of the reduction, the block's `rows` values first in each); b: the packed strips of the same k
// rows, strip s at b + s * b_strip_floats.
void block(float* C, int64_t ldc, const float* a, int64_t lda, const float* b,
           int64_t b_strip_floats, int rows, int n, int k, float beta, bool first);

}  // namespace nostrum::kernels::fp32_avx512
