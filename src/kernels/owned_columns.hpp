// The threads' own columns of a product whose B is packed in column strips (the bf16 GEMM's and
// nostrum's fp32 weight-gradient GEMM's): each thread packs and multiplies whole strips of its
// own, so no thread reads what another wrote (src/kernels/bf16_gemm.md, "Threads own columns").
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace nostrum::kernels {

// Whether N columns in strips of `strip` split between `threads` threads in equal whole shares.
inline bool strips_split_evenly(int N, int strip, int threads) {
  const int strips = (N + strip - 1) / strip;
  return threads > 1 && strips % threads == 0;
}

// On each thread of a team of `threads`: fn(j0, n, strips), its share of whole strips, columns
// [j0, j0 + n) (the last strip may be narrower); a thread with none is not called.
template <class Fn>
void for_owned_columns(int N, int strip, int threads, Fn&& fn) {
  const int strips = (N + strip - 1) / strip;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int s0 = int(int64_t(strips) * t / nt), s1 = int(int64_t(strips) * (t + 1) / nt);
    const int j0 = s0 * strip, n = std::min(N - j0, (s1 - s0) * strip);
    if (n > 0) fn(j0, n, s1 - s0);
  }
}

}  // namespace nostrum::kernels
