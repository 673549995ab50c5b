// bfloat16 (bf16): fp32's sign, 8-bit exponent and top 7 fraction bits (8-bit significand), one
// 16-bit word. Round-to-nearest-even conversion, whether the bf16 kernels run here, and the
// mixed-precision GEMM: bf16 operands (rounded from fp32 while packing), fp32 accumulation, fp32
// result. Packed operands are "pair matrices" of 32-bit words: word (p, j) holds op(X)[2p][j] in
// its low half and op(X)[2p+1][j] in its high half (the k-pairs that one vdpbf16ps lane sums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/precision.hpp"

namespace nostrum::kernels {

// ---- scalar conversion (the reference the vector code is tested against) ----

// Round to nearest, ties to even; NaN stays NaN (quiet bit set, sign and top payload kept);
// +-inf stays +-inf; values past bf16's largest finite round to inf as IEEE says; denormals round
// like any other value (no flush to zero).
// Written as a select of two computed words, without a branch, so loops that store through it
// vectorise.
inline uint16_t fp32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// Exact: every bf16 is an fp32.
inline float bf16_to_fp32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// x rounded to bf16 and back (what a bf16 operand holds), for references and tests.
inline float round_to_bf16(float x) {
  return bf16_to_fp32(fp32_to_bf16(x));
}

// dst[i] = fp32_to_bf16(src[i]), AVX-512 where the CPU has it; bit-identical to the scalar loop.
void convert_to_bf16(uint16_t* dst, const float* src, int64_t count);

// ---- availability (the CPU features table: nostrum/core/cpu_features.hpp) ----

// Whether the bf16 GEMM runs here: AVX512_BF16 (the vdpbf16ps engine, which every bf16 CPU has).
bool bf16_available();
// Which tiles compute the GEMM's products (the packing, the blocks and the fp32 results are the
// same): vdpbf16ps register tiles, or AMX tiles (tdpbf16ps, 16 x 16 fp32 accumulators a tile).
enum class Bf16Engine { kVdpbf16ps, kAmx };
// Whether the AMX engine runs here: AMX_TILE, AMX_BF16 and Linux's tile-data permission in the
// CPU features table (so NOSTRUM_MAX_ISA below amx, or NOSTRUM_CPU_NO_BF16, makes it false).
bool bf16_amx_available();
// "vdpbf16ps", "amx".
const char* bf16_engine_name(Bf16Engine engine);
// Throws OptionError naming the missing CPU feature (AVX512F or AVX512_BF16) unless available.
void require_bf16(const std::string& where);

// ---- mixed-precision GEMM ----

// Words of a packed op(B) (K x N): ceil(K/2) pair rows of N rounded up to 16 words.
size_t bf16_packed_b_words(int K, int N);
// Packs op(B) (K x N, row-major B with leading dimension ldb; B^T when trans_b) into dst (see top
// of file), rounding to bf16; an odd K's last pair and the columns past N are zero. Layout: strips
// of 32 columns (the last 16 or 32 wide), each strip's ceil(K/2) x width words contiguous, so the
// microkernel reads one contiguous run per block of pairs whatever N is.
void bf16_pack_b(uint32_t* dst, Trans trans_b, const float* B, int ldb, int K, int N);
// The same from B already in bf16 (a bf16 run's activations): op(B) = B only (trans_b kNo; a
// ShapeError otherwise), nothing rounded.
void bf16_pack_b(uint32_t* dst, Trans trans_b, const uint16_t* B, int ldb, int K, int N);

// C (M x N) = alpha * op(A) (M x K) * Bp + beta * C, with Bp from bf16_pack_b(K, N): A rounded to
// bf16, products summed in fp32 (vdpbf16ps, or AMX tiles with engine kAmx). beta == 0 never reads
// C. Called outside an OpenMP region it uses the pool; inside one, the calling thread. A is
// rounded one block (168 rows x 192 k-pairs; AMX: 160 x 1024) at a time into a per-thread buffer
// (129 KB; AMX 732 KB), once per block. Requires bf16_available(), and bf16_amx_available() for
// kAmx (throws OptionError).
void gemm_bf16_packed(Trans trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                      const uint32_t* Bp, float beta, float* C, int ldc,
                      Bf16Engine engine = Bf16Engine::kVdpbf16ps);
// The same with A already in bf16 (a bf16 output gradient): its values taken as they are, so the
// result is bit for bit the one of the fp32 call on A's values widened to fp32.
void gemm_bf16_packed(Trans trans_a, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                      const uint32_t* Bp, float beta, float* C, int ldc,
                      Bf16Engine engine = Bf16Engine::kVdpbf16ps);

// Same as kernels::gemm with both operands rounded to bf16: packs B into a per-thread buffer, a
// chunk of k of about 1 MiB of words at a time (whole 192-pair blocks: the same bits as one pack),
// and calls gemm_bf16_packed per chunk.
void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine = Bf16Engine::kVdpbf16ps);
// The same with A, B or both already in bf16 (as gemm_bf16_packed's bf16 A; a bf16 B with
// trans_b kNo only, as bf16_pack_b): the bits of the fp32 call on their values.
void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const uint16_t* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine = Bf16Engine::kVdpbf16ps);
void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine = Bf16Engine::kVdpbf16ps);
void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const uint16_t* A,
               int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine = Bf16Engine::kVdpbf16ps);

// gemm or gemm_bf16 by precision: the one call site the layers use.
inline void gemm(Precision precision, Trans trans_a, Trans trans_b, int M, int N, int K,
                 float alpha, const float* A, int lda, const float* B, int ldb, float beta,
                 float* C, int ldc, Bf16Engine engine = Bf16Engine::kVdpbf16ps) {
  if (precision == Precision::kBf16)
    gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, engine);
  else
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// ---- ceiling probe (tools/bench) ----

// Seconds for `iterations` rounds of 24 independent vdpbf16ps chains on registers (one thread):
// 24 * 16 lanes * 2 products * 2 flops per instruction. Requires bf16_available().
double bf16_dot_probe_seconds(int64_t iterations);
// The same rounds of 24 vfmadd231ps chains (24 * 16 lanes * 2 flops each): fp32's register
// ceiling, so the two are compared on one CPU. Requires AVX-512 (cpu_features().avx512()).
double fp32_fma_probe_seconds(int64_t iterations);

}  // namespace nostrum::kernels
