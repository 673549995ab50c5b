// The AMX tile loops of the mixed-precision GEMM (src/kernels/bf16.cpp drives them with
// Bf16Engine::kAmx): the same blocks as bf16_avx512::gemm_block, run on tdpbf16ps. Private to
// src/kernels: bf16_amx.cpp is compiled with -mamx-tile -mamx-bf16 and the AVX-512 flags and
// called only after bf16_amx_available() (AMX_TILE, AMX_BF16 and Linux's tile-data permission).
#pragma once

#include <cstdint>

#include "bf16_avx512.hpp"

namespace nostrum::kernels::bf16_amx {

// Rows of A a block's words must hold: the kernel reads whole 16-row tiles, so M rounded up to
// 16 (rows past M are read, their sums never stored).
constexpr int kBufferRows = (bf16_avx512::kBlockRows + 15) / 16 * 16;
// k-pairs of one block (C is read and written once per block: longer than the vdpbf16ps blocks,
// the tiles being fast enough for that traffic to show), and A's words a row in the block buffer
// (16 more: rows 4,160 bytes apart fall in different L1 sets, where 4,096 would not).
constexpr int kBlockPairs = 1024;
constexpr int kBlockWords = kBlockPairs + 16;

// C[i][j] (i < M, j < N, row stride ldc) = alpha * sum_p A(i, p) . B(p0 + p, j0 + j) + beta *
// C[i][j] when overwrite (beta == 0 never reads C), else C[i][j] += alpha * sum, for p < pairs
// (<= kBlockPairs), M <= kBlockRows, j0 a multiple of 32. A is a row-major block (word (i, p) at
// A[i * kBlockWords + p], the AMX A-tile layout) of at least round16(M) rows whose words from
// pairs to pairs rounded up to 16 are 0 (rows_to_words and interleave_rows_transposed write
// them). Loads the tile configuration on every call (other code on the thread, oneDNN's, may have
// changed it); release() frees the tiles.
void gemm_block(float* C, int64_t ldc, const uint32_t* A, const bf16_avx512::PackedB& B, int p0,
                int j0, int M, int N, int pairs, float alpha, float beta, bool overwrite);

// _tile_release(): the thread's tiles back to their initial state (no configuration).
void release();

}  // namespace nostrum::kernels::bf16_amx
