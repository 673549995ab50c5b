// The AMX tile register probe (amx_probe.cpp, compiled with -mamx-tile -mamx-bf16): the bf16
// ceiling of a CPU whose bf16 convolutions run on AMX tiles (oneDNN's brgemm primitives), where
// the vdpbf16ps probe says nothing. Private to src/kernels; callers check the CPU first.
#pragma once

#include <cstdint>

namespace nostrum::kernels::amx {

// Rows, k-pairs and columns of one tile step: C (16 x 16 fp32) += A (16 x 32 bf16) . B (32 x 16).
inline constexpr double kFlopsPerTileStep = 16.0 * 16 * 32 * 2;
// Independent accumulator tiles of the probe, each updated once per iteration.
inline constexpr int kProbeAccumulators = 4;

// iterations rounds of kProbeAccumulators tdpbf16ps on tiles already in registers (A all 1.0, B
// all 2^-7: each step adds 32 * 2^-7 = 0.25 to every element, exactly while the sums stay below
// 2^24). Returns the sum of the four tiles' element (0, 0): kProbeAccumulators * 0.25 *
// iterations. Configures the tiles on the calling thread and releases them. Requires AMX_TILE,
// AMX_BF16 and Linux's tile-data permission (cpu_features().amx_permitted).
float tile_probe(int64_t iterations);

}  // namespace nostrum::kernels::amx
