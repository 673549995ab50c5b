// nostrum's own fp32 GEMM for the convolutions' weight gradients: C = A^T B + beta C, where A
// (K x M) and B (K x N) are rows of the reduction (a weight gradient's output gradient and its
// input or im2col columns, one row per pixel), on AVX-512F register tiles of FMAs. A candidate
// beside OpenBLAS's SGEMM (kernels/conv_candidates.cpp: gemm_fp32_avx512); the measured choice
// decides where it runs.
#pragma once

namespace nostrum::kernels {

// Whether the CPU features table has AVX512F (NOSTRUM_MAX_ISA=avx2 clears it).
bool fp32_gemm_available();

// C (M x N, ldc) = A^T B + beta * C (beta 0: C is not read), A (K x M, lda), B (K x N, ldb), all
// row-major. Outside an OpenMP region it uses the pool (omp_get_max_threads()); inside one, the
// calling thread. Each C value sums its products in k order within blocks of 256, the blocks in
// order: the same bits at any thread count. Throws OptionError without AVX512F.
void gemm_fp32_tn(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc);

}  // namespace nostrum::kernels
