// The fp32 FMA register probe on 256-bit vectors, for CPUs without AVX-512 (fma_probe_avx2.cpp is
// compiled with -mavx2 -mfma and called only after a run-time check).
#pragma once

#include <cstdint>

namespace nostrum::kernels::avx2 {

// Seconds for `iterations` rounds of 24 independent vfmadd231ps ymm chains (24 * 8 lanes * 2 flops
// a round) on the calling thread.
double fma_probe_seconds(int64_t iterations);

}  // namespace nostrum::kernels::avx2
