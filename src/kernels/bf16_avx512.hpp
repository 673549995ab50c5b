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
// high half 0 past cols; words [ceil(cols/2), ld_words) of each row are zeroed.
void rows_to_words(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                   int cols);

// Pair-major words: dst[p * ld_words + c] = (src[2p][c], src[2p+1][c]) for p < ceil(rows/2), the
// high half 0 past rows; columns [cols, ld_words) zeroed. src is (rows, cols) row-major (lds).
void interleave_rows(uint32_t* dst, int64_t ld_words, const float* src, int64_t lds, int rows,
                     int cols);

// Pair-major words of the transpose: dst[p * ld_words + c] = (src[c][2p], src[c][2p+1]) for
// p < ceil(cols/2), c < rows; columns [rows, width) zeroed (width a multiple of 16). src is
// (rows, cols) row-major.
void interleave_columns(uint32_t* dst, int64_t ld_words, int width, const float* src, int64_t lds,
                        int rows, int cols);

// The operand A of one call: word (i, p) at a[i * row + p * pair] (row-major: pair == 1;
// pair-major: row == 1).
struct WordsA {
  const uint32_t* a = nullptr;
  int64_t row = 0, pair = 1;
};

// C[i][j] (i < M, j < N, row stride ldc) = alpha * sum_p A(i, p) . B(p, j) + beta * C[i][j] when
// overwrite (beta == 0 never reads C), else C[i][j] += alpha * sum. B: pair-major words, row
// stride ldb >= N rounded up to 16, zero past N. Sums pairs [0, pairs) of the given A and B.
void gemm_block(float* C, int64_t ldc, WordsA A, const uint32_t* B, int64_t ldb, int M, int N,
                int pairs, float alpha, float beta, bool overwrite);

// iterations rounds of 24 independent vdpbf16ps chains in registers; returns a value that depends
// on every chain (so nothing is optimised away).
float dot_probe(int64_t iterations);
// The same with vfmadd231ps (16 lanes x 2 flops): fp32's register ceiling, for the ratio.
float fma_probe(int64_t iterations);

}  // namespace nostrum::kernels::bf16_avx512
