// bf16 conversion and the driver of the mixed-precision GEMM: B packed in 32-column strips of
// k-pair words; the product cut into blocks of at most 168 rows x 192 k-pairs (all columns unless
// the threads need more pieces; an unpacked B whose strips split evenly: each thread packs and
// multiplies its own columns), A's block rounded into a 129 KB per-thread buffer once per block
// and handed with B's strips to the AVX512_BF16 register tiles (bf16_avx512.cpp) or, with
// Bf16Engine::kAmx, to the AMX tiles (bf16_amx.cpp; A's block then always row-major words).
#include "nostrum/kernels/bf16.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <type_traits>
#include <vector>

#include "bf16_amx.hpp"
#include "bf16_avx512.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "owned_columns.hpp"

namespace nostrum::kernels {

namespace {

int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}

// A thread's working words (A's block, B's packed chunk): every call writes what it reads, so a
// larger call replaces the buffer without copying or zeroing the old one (std::vector's resize
// did both: a first call at a new largest shape, 18.9 MB of B words for layer 4's 3x3 weight
// gradient, paid it, and the measured choice timed that call as the candidate's first).
class Words {
 public:
  uint32_t* at_least(size_t words) {
    buffer_.reserve(words * sizeof(uint32_t), "bf16 GEMM thread buffer");
    return static_cast<uint32_t*>(buffer_.data());
  }

 private:
  PageBuffer buffer_;  // fresh pages, large ones huge (core/page_memory.hpp)
};

Words& a_words() {
  thread_local Words words;
  return words;
}

Words& b_words() {
  thread_local Words words;
  return words;
}

// [begin, end) of `count` items for part `part` of `parts`.
inline int64_t split(int64_t count, int part, int parts) {
  return count * part / parts;
}

}  // namespace

void convert_to_bf16(uint16_t* dst, const float* src, int64_t count) {
  if (cpu_features().avx512()) {
    note_dispatch(DispatchSite::kBf16Convert, Isa::kAvx512);
    bf16_avx512::convert(dst, src, count);
    return;
  }
  note_dispatch(DispatchSite::kBf16Convert, Isa::kBaseline);
  for (int64_t i = 0; i < count; ++i) dst[i] = fp32_to_bf16(src[i]);
}

const char* precision_name(Precision p) {
  return p == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  static const std::vector<std::string> names = {"fp32", "bf16"};  // Precision order
  return parse_enum_name<Precision>(name, names, "--precision");
}

bool bf16_available() {
  return cpu_features().avx512_bf16;
}

bool bf16_amx_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx512_bf16 && f.amx_tiles();
}

const char* bf16_engine_name(Bf16Engine engine) {
  return engine == Bf16Engine::kAmx ? "amx" : "vdpbf16ps";
}

void require_bf16(const std::string& where) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_bf16) return;
  if (f.architecture != "x86_64")
    throw OptionError("bf16 precision is x86-64 only (its GEMM is AVX512_BF16 code); this " +
                          f.architecture + " build runs fp32 (" + f.describe() + ")",
                      where, "run with --precision fp32 (or auto)");
  throw OptionError(std::string("bf16 precision needs the CPU feature ") +
                        (f.avx512() ? "AVX512_BF16" : "AVX512F/AVX512BW") +
                        ", which this CPU lacks (" + f.describe() + ")",
                    where, "run with --precision fp32");
}

size_t bf16_packed_b_words(int K, int N) {
  return size_t((K + 1) / 2) * size_t(round16(N));
}

namespace {

// fn(s0, s1) on each thread's share of the 32-column strips of an N-column packed B (the pool's
// threads outside a parallel region, the calling thread inside one).
template <class Fn>
void for_strips(int N, Fn&& fn) {
  const int strips = (int(round16(N)) + bf16_avx512::kStrip - 1) / bf16_avx512::kStrip;
  const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1 && strips > 1;
#pragma omp parallel if (threaded)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int s0 = int(split(strips, t, nt)), s1 = int(split(strips, t + 1, nt));
    if (s1 > s0) fn(s0, s1);
  }
}

}  // namespace

namespace {

// Strips [s0, s1) of op(B) (K x N) packed into dst, laid out for all of op(B)'s N columns.
void pack_strips(uint32_t* dst, Trans trans_b, const float* B, int ldb, int K, int N, int s0,
                 int s1) {
  const int n_padded = int(round16(N));
  if (trans_b == Trans::kNo)  // op(B) = B (K x N): pairs of rows
    bf16_avx512::pack_b_rows(dst, n_padded, B, ldb, K, N, s0, s1);
  else  // op(B) = B^T, B stored (N x K)
    bf16_avx512::pack_b_columns(dst, n_padded, B, ldb, N, K, s0, s1);
}

// (A bf16 B is packed from its rows only: op(B) = B, checked by the callers.)
void pack_strips(uint32_t* dst, Trans, const uint16_t* B, int ldb, int K, int N, int s0, int s1) {
  bf16_avx512::pack_b_rows(dst, int(round16(N)), B, ldb, K, N, s0, s1);
}

template <class BValue>
void check_b_layout(Trans trans_b, const char* where) {
  if constexpr (std::is_same_v<BValue, uint16_t>)
    NOSTRUM_CHECK(trans_b == Trans::kNo, ShapeError,
                  "a bf16 B is packed from its rows only (op(B) = B)", where);
}

template <class BValue>
void pack_b(uint32_t* dst, Trans trans_b, const BValue* B, int ldb, int K, int N) {
  require_bf16("bf16_pack_b");
  check_b_layout<BValue>(trans_b, "bf16_pack_b");
  note_dispatch(DispatchSite::kBf16Gemm, Isa::kAvx512Bf16);
  for_strips(N, [&](int s0, int s1) { pack_strips(dst, trans_b, B, ldb, K, N, s0, s1); });
}

}  // namespace

void bf16_pack_b(uint32_t* dst, Trans trans_b, const uint16_t* B, int ldb, int K, int N) {
  pack_b(dst, trans_b, B, ldb, K, N);
}

void bf16_pack_b(uint32_t* dst, Trans trans_b, const float* B, int ldb, int K, int N) {
  pack_b(dst, trans_b, B, ldb, K, N);
}

namespace {

// gemm_bf16_packed for A of either type: fp32 (rounded block by block) or bf16 (taken as it is).
template <class AValue>
void gemm_packed(Trans trans_a, int M, int N, int K, float alpha, const AValue* A, int lda,
                 const uint32_t* Bp, float beta, float* C, int ldc, Bf16Engine engine) {
  using bf16_avx512::kBlockRows;
  using bf16_avx512::kStrip;
  require_bf16("gemm_bf16");
  const bool amx = engine == Bf16Engine::kAmx;
  if (amx && !bf16_amx_available())
    throw OptionError(
        "the bf16 GEMM's AMX engine needs AMX_TILE, AMX_BF16 and Linux's tile-data "
        "permission (" +
            cpu_features().describe() + ")",
        "gemm_bf16", "use the vdpbf16ps engine");
  note_dispatch(DispatchSite::kBf16Gemm, amx ? Isa::kAmx : Isa::kAvx512Bf16);
  // k-pairs a block and A's words a row in the block buffer (AMX: longer blocks, as C is read and
  // written once per block and the tiles are fast enough for that to show).
  const int block_pairs = amx ? bf16_amx::kBlockPairs : bf16_avx512::kBlockPairs;
  const int64_t a_ld = amx ? bf16_amx::kBlockWords : bf16_avx512::kBlockPairs;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_matrix(M, N, beta, C, ldc);  // no products
  bf16_avx512::PackedB b;
  b.b = Bp, b.pairs = (K + 1) / 2, b.n_padded = int(round16(N));
  const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1;
  const int threads = threaded ? omp_get_max_threads() : 1;
  // Row blocks of at most kBlockRows rows, as many as a multiple of the threads and of one height,
  // so that the threads' shares are alike (7 blocks of 168 rows or fewer split 4 : 3 between two
  // threads; 8 of 128 split evenly). The sums do not depend on the blocks.
  // AMX: at most 160 rows (5 pairs of 16-row tiles), a multiple of 16 (whole tiles but the last).
  constexpr int kAmxBlockRows = kBlockRows / 32 * 32;
  const int max_rows = amx ? kAmxBlockRows : kBlockRows;
  int64_t row_blocks = (M + max_rows - 1) / max_rows;
  if (threads > 1) row_blocks = (row_blocks + threads - 1) / threads * threads;
  int block_rows = int((M + row_blocks - 1) / row_blocks);
  if (amx) block_rows = std::min(kAmxBlockRows, int(round16(block_rows)));
  row_blocks = (M + block_rows - 1) / block_rows;
  // All columns in one piece (A's block converted once), cut finer (multiples of 32) only when
  // the rows give too few pieces for the threads.
  int64_t columns = (N + kStrip - 1) / kStrip * kStrip;
  while (columns > kStrip && row_blocks * ((N + columns - 1) / columns) < 2 * threads)
    columns = (columns / 2 + kStrip - 1) / kStrip * kStrip;
  const int64_t column_blocks = (N + columns - 1) / columns;
  const int64_t pieces = row_blocks * column_blocks;
  const bool pair_major = trans_a == Trans::kYes;

  // A's block of step (piece, p0): its first row, its rows of the block (i0, rows) and its k.
  struct ABlock {
    const AValue* src;
    int i0, rows, k;
  };
  const auto a_block = [&](int64_t piece, int p0) {
    const int i0 = int(piece / column_blocks * block_rows);
    const int k = std::min(K - 2 * p0, 2 * block_pairs);             // A's columns in this block
    const AValue* src = pair_major ? A + int64_t(2 * p0) * lda + i0  // A stored (K x M)
                                   : A + int64_t(i0) * lda + 2 * p0;
    return ABlock{src, i0, std::min(M - i0, block_rows), k};
  };
  // The source of step (piece, p0) as rows of bytes (nothing past the last step).
  const auto source = [&](int64_t piece, int p0) {
    bf16_avx512::Prefetch f;
    if (piece >= pieces || p0 >= b.pairs) return f;
    const ABlock a = a_block(piece, p0);
    f.base = reinterpret_cast<const char*>(a.src);
    f.stride = int64_t(lda) * int64_t(sizeof(AValue));
    f.rows = pair_major ? a.k : a.rows;
    f.row_bytes = (pair_major ? a.rows : a.k) * int(sizeof(AValue));
    return f;
  };
  // One (piece, k-block) step: A's block as bf16 words, then its products, which prefetch the
  // source of the step after it.
  const auto step = [&](uint32_t* words, int64_t piece, int p0, const bf16_avx512::Prefetch& next) {
    const ABlock a = a_block(piece, p0);
    const int64_t cb = piece % column_blocks;
    const int j0 = int(cb * columns), n = int(std::min<int64_t>(N - j0, columns));
    const int pairs = std::min(block_pairs, b.pairs - p0);
    if (amx) {  // row-major words, the AMX A-tile layout, whatever A's layout
      if (pair_major)
        bf16_avx512::interleave_rows_transposed(words, a_ld, a.src, lda, a.k, a.rows);
      else
        bf16_avx512::rows_to_words(words, a_ld, a.src, lda, a.rows, a.k);
      bf16_amx::gemm_block(C + int64_t(a.i0) * ldc + j0, ldc, words, b, p0, j0, a.rows, n, pairs,
                           alpha, beta, p0 == 0);
      return;
    }
    if (pair_major)  // pairs of A's rows
      bf16_avx512::interleave_rows(words, kBlockRows, a.src, lda, a.k, a.rows);
    else
      bf16_avx512::rows_to_words(words, block_pairs, a.src, lda, a.rows, a.k);
    bf16_avx512::gemm_block(C + int64_t(a.i0) * ldc + j0, ldc, words, pair_major, b, p0, j0, a.rows,
                            n, pairs, alpha, beta, p0 == 0, next);
  };
  // (The AMX tiles read A's rows 16 at a time: up to M rounded up to 16.)
  const auto block_words = [&] {
    return a_words().at_least(amx ? size_t(bf16_amx::kBufferRows) * size_t(a_ld)
                                  : size_t(kBlockRows) * bf16_avx512::kBlockPairs);
  };
  if (threads == 1) {
    // One thread (also each thread of a per-thread conv): k-blocks outer, so that a pair-major
    // A (a weight gradient's output gradient, rows of all M values) is read row after whole row
    // (the second piece's part of a row is still cached) instead of once per piece with a stride
    // the prefetcher does not follow. Each C value still sums its k-blocks in order: the same bits.
    uint32_t* words = block_words();
    for (int p0 = 0; p0 < b.pairs; p0 += block_pairs)
      for (int64_t piece = 0; piece < pieces; ++piece)
        step(words, piece, p0,
             piece + 1 < pieces ? source(piece + 1, p0) : source(0, p0 + block_pairs));
    if (amx) bf16_amx::release();
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    uint32_t* words = block_words();
#pragma omp for schedule(dynamic, 1)
    for (int64_t piece = 0; piece < pieces; ++piece)
      for (int p0 = 0; p0 < b.pairs; p0 += block_pairs)
        step(words, piece, p0, source(piece, p0 + block_pairs));
    if (amx) bf16_amx::release();
  }
}

// gemm_bf16 for A and B of either type.
template <class AValue, class BValue>
void gemm_unpacked(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const AValue* A,
                   int lda, const BValue* B, int ldb, float beta, float* C, int ldc,
                   Bf16Engine engine) {
  require_bf16("gemm_bf16");
  // B packed a chunk of k at a time (whole 192-pair blocks, about kChunkWords words), so a long
  // reduction (a weight gradient over all of a batch's pixels) never holds all of B as words. The
  // driver adds block after block into C, so the chunks give the same bits as one call.
  // (AMX: whole blocks of its longer k, so a chunk is at least one of them.)
  constexpr int64_t kChunkWords = int64_t(1) << 18;  // 1 MiB
  const int block_pairs =
      engine == Bf16Engine::kAmx ? bf16_amx::kBlockPairs : bf16_avx512::kBlockPairs;
  const int64_t block_words = int64_t(block_pairs) * round16(N);
  const int chunk = 2 * block_pairs * int(std::max<int64_t>(1, kChunkWords / block_words));
  check_b_layout<BValue>(trans_b, "gemm_bf16");
  const auto b_rows = [&](const BValue* b, int k0) {  // op(B)'s rows from k0 on
    return b + (trans_b == Trans::kNo ? int64_t(k0) * ldb : k0);
  };
  const auto a_columns = [&](int k0) {  // op(A)'s columns from k0 on
    return A + (trans_a == Trans::kNo ? k0 : int64_t(k0) * lda);
  };
  const int threads = !omp_in_parallel() ? omp_get_max_threads() : 1;
  if (strips_split_evenly(N, bf16_avx512::kStrip, threads) && engine != Bf16Engine::kAmx && M > 0 &&
      K > 0) {
    // Threads own columns (owned_columns.hpp): each packs its strips of every chunk and multiplies
    // them by all of A's rows into its columns of C. With the packing split by strips and the
    // products by rows, each thread read half of every chunk and some of C from the other's
    // cache, and a weight gradient ran 19-43 % slower while the host held the two vCPUs on cores
    // far apart. A's blocks are converted by every thread; the sums are those of one thread, the
    // same bits. The words are laid out as one packing of a run of all of B's columns would lay
    // them (strip s from word 32 s run_pairs on), each thread packing into its strips' part
    // whatever run the other threads are at (every run fits: at most run_pairs pairs).
    const int64_t run_pairs = (std::min(chunk, K) + 1) / 2;
    uint32_t* words = b_words().at_least(size_t(run_pairs) * size_t(round16(N)));
    for_owned_columns(N, bf16_avx512::kStrip, threads, [&](int j0, int n, int strips) {
      const BValue* b = B + (trans_b == Trans::kNo ? j0 : int64_t(j0) * ldb);
      uint32_t* packed = words + j0 * run_pairs;
      for (int k0 = 0; k0 < K; k0 += chunk) {
        const int k = std::min(chunk, K - k0);
        pack_strips(packed, trans_b, b_rows(b, k0), ldb, k, n, 0, strips);
        gemm_packed(trans_a, M, n, k, alpha, a_columns(k0), lda, packed, k0 == 0 ? beta : 1.0f,
                    C + j0, ldc, engine);
      }
    });
    return;
  }
  int k0 = 0;
  do {
    const int k = std::min(chunk, K - k0);
    uint32_t* packed = b_words().at_least(bf16_packed_b_words(k, N));
    bf16_pack_b(packed, trans_b, b_rows(B, k0), ldb, k, N);
    gemm_packed(trans_a, M, N, k, alpha, a_columns(k0), lda, packed, k0 == 0 ? beta : 1.0f, C, ldc,
                engine);
    k0 += chunk;
  } while (k0 < K);
}

}  // namespace

void gemm_bf16_packed(Trans trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                      const uint32_t* Bp, float beta, float* C, int ldc, Bf16Engine engine) {
  gemm_packed(trans_a, M, N, K, alpha, A, lda, Bp, beta, C, ldc, engine);
}

void gemm_bf16_packed(Trans trans_a, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                      const uint32_t* Bp, float beta, float* C, int ldc, Bf16Engine engine) {
  gemm_packed(trans_a, M, N, K, alpha, A, lda, Bp, beta, C, ldc, engine);
}

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc, Bf16Engine engine) {
  gemm_unpacked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, engine);
}

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const uint16_t* A,
               int lda, const float* B, int ldb, float beta, float* C, int ldc, Bf16Engine engine) {
  gemm_unpacked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, engine);
}

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const float* A,
               int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine) {
  gemm_unpacked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, engine);
}

void gemm_bf16(Trans trans_a, Trans trans_b, int M, int N, int K, float alpha, const uint16_t* A,
               int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc,
               Bf16Engine engine) {
  gemm_unpacked(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, engine);
}

double bf16_dot_probe_seconds(int64_t iterations) {
  require_bf16("bf16_dot_probe");
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = bf16_avx512::dot_probe(iterations);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double fp32_fma_probe_seconds(int64_t iterations) {
  NOSTRUM_CHECK(cpu_features().avx512(), OptionError, "the FMA probe needs AVX512F",
                "fp32_fma_probe");
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = bf16_avx512::fma_probe(iterations);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nostrum::kernels
