// The AVX512_BF16 loops of the mixed-precision GEMM (src/kernels/bf16.cpp drives them). Private to
// src/kernels: bf16_avx512.cpp is compiled with -mavx512f -mavx512bw -mavx512bf16 and holds nothing
// but these loops; the driver calls them only after checking the CPU at run time. A "word" is two
// bf16 values of one k-pair: low half k = 2p, high half k = 2p + 1 (see nostrum/kernels/bf16.hpp).
#pragma once

#include <cstdint>

namespace nostrum::kernels::bf16_avx512 {

// dst[i] = bf16 of src[i] (round to nearest even, NaN kept): bit-identical to fp32_to_bf16.
void convert(uint16_t* dst, const float* src, int64_t count);

// Row-major words: dst[r * ld_words + p] = (src[r][2p], src[r][2p+1]) for rows [0, rows), the
// high half 0 past cols, words from ceil(cols/2) rounded up to 16 (at most ld_words) not written.
void rows_to_words(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                   int cols);

// Pair-major words: dst[p * ld_words + c] = (src[2p][c], src[2p+1][c]) for p < ceil(rows/2), the
// high half 0 past rows; columns from cols rounded up to 16 (at most ld_words) not written. src
// is (rows, cols) row-major (lds).
void interleave_rows(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                     int cols);

// The same two layouts from A already in bf16 (src rows of bf16 values): nothing is rounded, the
// words are the values as they are, so the result equals the fp32 loops' on fp32 copies of them.
void rows_to_words(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds, int rows,
                   int cols);
void interleave_rows(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds, int rows,
                     int cols);

// Row-major words of src^T (the AMX A-tile layout of a pair-major A): dst[c * ld_words + p] =
// (src[2p][c], src[2p+1][c]) for c < cols and p < ceil(rows/2) rounded up to 16 (at most
// ld_words), the high half 0 past rows and the words past ceil(rows/2) 0; rows of dst past cols
// not written. src is (rows, cols) row-major (lds); words transposed 16 x 16 in registers. From
// fp32 (rounded as everywhere) or bf16 (taken as it is).
void interleave_rows_transposed(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds,
                                int rows, int cols);
void interleave_rows_transposed(uint32_t* dst, int64_t ld_words, const uint16_t* src, int64_t lds,
                                int rows, int cols);

// ---- packed B: column strips ----
// op(B) (K x N) as pair words in strips of 32 columns (the last strip 16 or 32 wide: N rounded up
// to 16): strip s holds pairs [0, pairs) x its width contiguously, so the microkernel's B operand
// for a block of pairs is one contiguous run (no cache-set conflicts whatever N is).
constexpr int kStrip = 32;
struct PackedB {
  const uint32_t* b = nullptr;
  int pairs = 0;     // ceil(K / 2)
  int n_padded = 0;  // N rounded up to 16
  int width(int strip) const {
    return n_padded - kStrip * strip < kStrip ? n_padded - kStrip * strip : kStrip;
  }
  // Word (p, j) for j the first column of a strip (a multiple of 32).
  const uint32_t* at(int p, int j) const {
    return b + int64_t(j) * pairs + int64_t(p) * width(j / kStrip);
  }
};

// Packs op(B) = pair rows of src (rows x cols, row-major, lds) into the strip layout for the strips
// [s0, s1): word (p, j) = (src[2p][j], src[2p+1][j]), zero past rows and cols.
void pack_b_rows(uint32_t* dst, int n_padded, const float* src, int64_t lds, int rows, int cols,
                 int s0, int s1);
// pack_b_rows from rows already in bf16: nothing rounded.
void pack_b_rows(uint32_t* dst, int n_padded, const uint16_t* src, int64_t lds, int rows, int cols,
                 int s0, int s1);
// The same for op(B) = src^T, src (cols_of_op_b x rows_of_op_b) = (N x K) row-major: word (p, j) =
// (src[j][2p], src[j][2p+1]).
void pack_b_columns(uint32_t* dst, int n_padded, const float* src, int64_t lds, int n, int k,
                    int s0, int s1);

// ---- A: one block per (rows, pairs) cache block, converted by the driver ----
// Row-major block: word (i, p) at a[i * kBlockPairs + p]; pair-major block: a[p * kBlockRows + i].
// Both strides are compile-time constants, so the microkernel's broadcasts are one pointer plus
// immediate offsets.
constexpr int kBlockRows = 168;  // 12 tiles of 14 rows (2 strips) or 7 of 24 (1 strip)
constexpr int kBlockPairs = 192;

// Memory that a block's tiles pull into the cache while they compute, one 64-byte line per k-pair
// step: the next block's A source, which its conversion then finds cached instead of waiting on
// memory between blocks. rows rows of row_bytes bytes, stride bytes apart, from byte `byte` of
// the row at base; nothing when rows is 0. The tiles advance it as they go.
struct Prefetch {
  const char* base = nullptr;
  int64_t stride = 0;
  int rows = 0;
  int row_bytes = 0;
  int byte = 0;
  int64_t lines_left() const {
    return rows > 0 ? int64_t(rows) * ((row_bytes + 63) / 64) - byte / 64 : 0;
  }
};

// C[i][j] (i < M, j < N, row stride ldc) = alpha * sum_p A(i, p) . B(p0 + p, j0 + j) + beta *
// C[i][j] when overwrite (beta == 0 never reads C), else C[i][j] += alpha * sum, for p < pairs
// (<= kBlockPairs), M <= kBlockRows; j0 a multiple of 32.
void gemm_block(float* C, int64_t ldc, const uint32_t* A, bool pair_major, const PackedB& B, int p0,
                int j0, int M, int N, int pairs, float alpha, float beta, bool overwrite,
                const Prefetch& next = {});

// iterations rounds of 24 independent vdpbf16ps chains in registers; returns a value that depends
// on every chain (so nothing is optimised away).
float dot_probe(int64_t iterations);
// The same with vfmadd231ps (16 lanes x 2 flops): fp32's register ceiling, for the ratio.
float fma_probe(int64_t iterations);

}  // namespace nostrum::kernels::bf16_avx512
