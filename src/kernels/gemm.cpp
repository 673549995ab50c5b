// Row-major SGEMM through OpenBLAS's CBLAS interface, and a GEMM's result without products.
#include "nostrum/kernels/gemm.hpp"

#include <cblas.h>

#include <cstdint>

namespace nostrum::kernels {

void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::kYes ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb,
              beta, C, ldc);
}

void scale_matrix(int M, int N, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      C[int64_t(i) * ldc + j] = beta == 0.0f ? 0.0f : beta * C[int64_t(i) * ldc + j];
}

std::string blas_core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace nostrum::kernels
