// fp32 <-> bf16 on AVX-512 lanes as kernels/bf16.hpp rounds and widens one value (x86 only; for
// the AVX-512 kernels: the bf16 GEMM's packing, the Winograd transforms, the batch norm's row
// kernels). Each function carries its own target, so it inlines into a file compiled with
// -mavx512f as well as into a function with a target attribute.
#pragma once

#include <immintrin.h>

namespace nostrum::kernels::bf16_lanes {

#define NOSTRUM_BF16_LANES inline __attribute__((target("avx512f"), always_inline))

// The upper 16 bits of each lane = fp32_to_bf16 of it: round to nearest even in integer arithmetic
// (so subnormals round like the scalar reference instead of being flushed, as vcvtneps2bf16 does),
// a NaN made quiet.
NOSTRUM_BF16_LANES __m512i round_bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

// bf16 to fp32, exactly: the 16 bits as the high half of each lane.
NOSTRUM_BF16_LANES __m512 widen(__m256i bf16) {
  // (The maskz forms, all lanes: GCC 12 warns of its own undefined operand in the plain ones.)
  const __mmask16 all = 0xffff;
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, bf16), 16));
}

#undef NOSTRUM_BF16_LANES

}  // namespace nostrum::kernels::bf16_lanes
