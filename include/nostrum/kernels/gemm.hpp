// The one BLAS wrapper: row-major single-precision GEMM, C = alpha * op(A) * op(B) + beta * C, with
// op(A) (M x K), op(B) (K x N), C (M x N). Called outside an OpenMP region it uses the whole OpenMP
// pool (OpenBLAS's OpenMP build); inside one, it runs on the calling thread.
#pragma once

#include <string>

namespace nostrum::kernels {

enum class Trans { kNo, kYes };

void gemm(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);

// C (M x N, ldc) = beta * C, zeros where beta is 0 (C then not read): what a GEMM without products
// (K = 0) leaves; nostrum's own GEMMs (kernels/bf16.hpp, kernels/fp32_gemm.hpp) call it.
void scale_matrix(int M, int N, float beta, float* C, int ldc);

// Which OpenBLAS kernel set runs ("Haswell", "Cooperlake", ...): print it with every benchmark.
std::string blas_core_name();

}  // namespace nostrum::kernels
