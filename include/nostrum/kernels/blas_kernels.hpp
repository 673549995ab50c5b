// Choosing OpenBLAS's kernel set at start-up. OpenBLAS 0.3.21 (Debian 12) picks its kernels by CPU
// model and falls back to generic SSE3 ("Prescott") kernels on CPUs newer than it knows (e.g. Intel
// family 6 model 207, Emerald Rapids): 5-7x slower SGEMM. The choice is made when the library
// loads, so the only fix is the documented OPENBLAS_CORETYPE variable plus a re-exec of the
// program.
#pragma once

namespace nostrum::kernels {

// Call first thing in main(), before MPI_Init and before any thread starts. When OPENBLAS_CORETYPE
// is not set and OpenBLAS chose a generic kernel set, or a core above the NOSTRUM_MAX_ISA cap
// (e.g. SkylakeX or Cooperlake under avx2), and the CPU features table (after the cap) supports
// AVX-512 (SkylakeX kernels) or AVX2 + FMA (Haswell kernels), sets OPENBLAS_CORETYPE accordingly
// and re-executes the program with the same arguments (once). Does nothing when the user set
// OPENBLAS_CORETYPE (their choice is kept; a note says when it is above the cap) or
// NOSTRUM_KEEP_BLAS_KERNELS=1, nor when NOSTRUM_MAX_ISA is unknown (the program's own option
// checks report that). Returns normally when no re-exec happened.
// NOSTRUM_TEST_FORCE_BLAS_REEXEC=1 (for tests) re-executes as if OpenBLAS had chosen a generic
// kernel set, so the re-exec path runs on every CPU with AVX2 + FMA or AVX-512.
// On aarch64 it never re-executes (the table has no x86 features there): OpenBLAS's own choice of
// its arm64 kernels by the core's part (ARMV8, NEOVERSEN1, A64FX, ...) is kept.
void select_blas_kernels(char** argv);

}  // namespace nostrum::kernels
