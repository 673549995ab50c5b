// dst[i] += add[i] on the OpenMP pool: how the oneDNN wrappers sum a gradient they had to compute
// into a buffer (backward-data's accumulate, backward-weights' image chunks).
#pragma once

#include <cstdint>

namespace nostrum::kernels {

inline void parallel_add(float* dst, const float* add, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) dst[i] += add[i];
}

}  // namespace nostrum::kernels
