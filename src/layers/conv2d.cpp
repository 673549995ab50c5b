// Conv2d on NHWC activations: the direct AVX-512 kernels (kernels/direct_conv) for small channel
// counts, otherwise GEMMs: 1x1 stride-1 convs multiply the activations directly; other shapes build
// (rows, R*S*C) im2col tiles (bounded scratch) against weights packed to (K, R*S*C).
#include "nostrum/layers/conv2d.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/direct_conv.hpp"
#include "nostrum/kernels/fp32_gemm.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/im2col.hpp"

namespace nostrum::layers {

namespace {

using kernels::gemm;
using kernels::PatchShape;
using kernels::Trans;

constexpr size_t kDefaultColumnBudgetFloats = size_t(1) << 23;  // 32 MiB: tiles, partials
constexpr size_t kTileFloats = size_t(1) << 19;  // one thread's im2col tile: 2 MiB, about one L2
// OpenBLAS re-packs the weights for every GEMM call: below ~512 rows a call that costs more than a
// few per cent of its multiply-adds.
constexpr int64_t kMinTileRows = 512;
// ConvAlgorithm::kAuto: the direct kernels up to this many channels in and out (half as many for
// stride 2).
constexpr int kDirectMaxChannels = 128;

std::string describe(const ConvGeometry& g) {
  return "conv N=" + std::to_string(g.N) + " H=" + std::to_string(g.H) +
         " W=" + std::to_string(g.W) + " C=" + std::to_string(g.C) + " K=" + std::to_string(g.K) +
         " R=" + std::to_string(g.R) + " S=" + std::to_string(g.S) +
         " stride=" + std::to_string(g.stride) + " pad=" + std::to_string(g.pad);
}

void check_geometry(const ConvGeometry& g) {
  NOSTRUM_CHECK(g.N > 0 && g.H > 0 && g.W > 0 && g.C > 0 && g.K > 0 && g.R > 0 && g.S > 0 &&
                    g.stride > 0 && g.pad >= 0,
                ShapeError, "conv sizes must be positive (pad >= 0)", describe(g));
  NOSTRUM_CHECK(g.H + 2 * g.pad >= g.R && g.W + 2 * g.pad >= g.S, ShapeError,
                "conv kernel larger than the padded input", describe(g),
                "increase the input size or the padding");
}

// Everything a call decides from the geometry: no allocation, no state. The scratch holds
// [packed weights or their gradient (K, R*S*C)] [column region]; the column region holds im2col
// tiles, or per-thread weight-gradient partials followed by tiles. Its size does not depend on the
// thread count (threads only divide it), so scratch sized once stays valid whatever the pool size.
struct Plan {
  PatchShape shape;
  int64_t rows = 0;        // output pixels N*P*Q: the GEMM's M
  int64_t row_length = 0;  // R*S*C: the GEMM's inner dimension
  bool direct = false;     // 1x1, stride 1, pad 0: in (N*H*W, C) is the column matrix itself
  bool pack = false;       // weight (K,C,R,S) must be reordered to (K, R*S*C)
  size_t pack_floats = 0;  // packed weights (or their gradient), padded to 64 bytes
  // bf16 only: the weights as bf16 k-pair words for the forward and backward-data GEMMs' B
  // operand (kernels/bf16.hpp), after the packed weights; 0 in fp32.
  size_t word_floats = 0;
  size_t column_floats = 0;   // the column region
  size_t partial_floats = 0;  // one thread's weight-gradient partial (K, R*S*C), padded
  int64_t shared_tile_rows = 0;
};

Plan make_plan(const ConvGeometry& g, const ConvOptions& options) {
  check_geometry(g);
  Plan plan;
  PatchShape& s = plan.shape;
  s.N = g.N, s.H = g.H, s.W = g.W, s.C = g.C, s.R = g.R, s.S = g.S, s.stride = g.stride;
  s.pad = g.pad, s.P = g.P(), s.Q = g.Q();
  plan.rows = s.rows();
  plan.row_length = s.row_length();
  plan.direct = g.R == 1 && g.S == 1 && g.stride == 1 && g.pad == 0;
  plan.pack = g.R * g.S > 1 && g.C > 1;
  plan.partial_floats = Arena::padded(size_t(g.K) * plan.row_length);
  // The direct kernels reorder the weights into the same region.
  const size_t direct_floats =
      kernels::direct_conv_available() ? Arena::padded(kernels::direct_conv_packed_floats(g)) : 0;
  plan.pack_floats = std::max(plan.pack ? plan.partial_floats : size_t(0), direct_floats);
  if (options.precision == kernels::Precision::kBf16) {
    if (!kernels::bf16_available()) kernels::require_bf16(describe(g));  // no string per call
    // Forward: op(B) = packed^T (R*S*C x K); backward data: op(B) = packed (K x R*S*C).
    plan.word_floats =
        Arena::padded(std::max(kernels::bf16_packed_b_words(int(plan.row_length), g.K),
                               kernels::bf16_packed_b_words(g.K, int(plan.row_length))));
    plan.pack_floats += plan.word_floats;
  }
  const size_t budget =
      options.column_budget_floats ? options.column_budget_floats : kDefaultColumnBudgetFloats;
  const size_t all = Arena::padded(size_t(plan.rows) * plan.row_length);
  plan.column_floats = std::min(all, std::max(budget, size_t(plan.row_length)));
  plan.shared_tile_rows = int64_t(plan.column_floats / plan.row_length);
  return plan;
}

using kernels::ConvPass;
using Pass = kernels::ConvPass;

// Whether a pass runs on the direct kernels (see ConvAlgorithm).
bool use_direct(const ConvGeometry& g, Pass pass, ConvAlgorithm algorithm,
                kernels::Precision precision) {
  if (algorithm == ConvAlgorithm::kGemm || precision == kernels::Precision::kBf16) return false;
  const bool fits = pass == Pass::kForward        ? kernels::direct_conv_forward_fits(g)
                    : pass == Pass::kBackwardData ? kernels::direct_conv_backward_data_fits(g)
                                                  : kernels::direct_conv_backward_weights_fits(g);
  if (!fits) return false;
  if (algorithm == ConvAlgorithm::kDirect) return true;
  // kAuto, from nostrum-conv-bench --algorithm all (tools/bench/README.md): the direct kernels win
  // on spatial kernels with few channels (their tiles stay in L1/L2); 1x1 convs are plain GEMMs
  // except for the weight gradient of a thin one (resnet8's shortcuts: the GEMM's inner dimension
  // is all pixels, its output only C x K), and a weight gradient over 2-15 input channels leaves
  // the direct kernel's registers idle.
  if (g.R * g.S == 1) return pass == Pass::kBackwardWeights && g.C <= 32 && g.K <= 64;
  const int max_channels = g.stride == 1 ? kDirectMaxChannels : kDirectMaxChannels / 2;
  if (g.C > max_channels || g.K > max_channels) return false;
  return pass != Pass::kBackwardWeights || g.C >= 16 || g.C * g.R * g.S <= 16;
}

// Rows per tile when each of `threads` threads owns a slice of the column region (after the
// weight-gradient partials in that pass); 0 when it does not fit. Direct convs need no buffer:
// their tile is only the unit of work handed to threads.
int64_t per_thread_tile_rows(const Plan& plan, Pass pass, int threads) {
  size_t room = plan.column_floats;
  if (pass == Pass::kBackwardWeights) {
    const size_t partials = size_t(threads) * plan.partial_floats;
    if (partials > room) return 0;
    room -= partials;
  }
  const int64_t want = std::max(kMinTileRows, int64_t(kTileFloats / plan.row_length));
  if (plan.direct) return want;
  return std::min(want, int64_t(room / (size_t(threads) * plan.row_length)));
}

// The piece size when `total` items are cut into pieces of at most `most`, their count rounded up
// to a multiple of `threads`: every thread gets as many pieces (a conv with few rows, e.g.
// ResNet-50's last stage at 64x64 input, would otherwise be one tile on one thread while the others
// idle).
int64_t balanced_piece(int64_t total, int64_t most, int threads) {
  int64_t pieces = (total + most - 1) / most;
  pieces = std::min(total, (pieces + threads - 1) / threads * threads);
  return (total + pieces - 1) / pieces;
}

// [begin, end) of `count` items for part `part` of `parts` (balanced, contiguous).
inline int64_t split(int64_t count, int part, int parts) {
  return count * part / parts;
}

// Which threading a pass uses. Per-thread tiles need a column slice per thread (and partials for
// the weight gradient). They win on the shapes measured (tools/bench/README.md): no barrier per
// tile, each thread's tile stays in its own cache, and tiles are handed out dynamically, so a
// thread slowed by other work on the node does not hold the other back.
ConvThreading choose(const Plan& plan, Pass pass, int threads, ConvThreading requested) {
  if (threads <= 1) return ConvThreading::kSharedGemm;
  if (per_thread_tile_rows(plan, pass, threads) <= 0) return ConvThreading::kSharedGemm;
  if (requested != ConvThreading::kAuto) return requested;
  return ConvThreading::kPerThread;
}

// col (rows, R*S*C) for output rows [row_begin, row_begin + rows), the rows split over the pool.
template <class T>  // float, or uint16_t for bf16 activations
void im2col_parallel(T* col, const T* in, const Plan& plan, int64_t row_begin, int64_t rows) {
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b = split(rows, t, nt), e = split(rows, t + 1, nt);
    kernels::im2col_nhwc(col + b * plan.row_length, in, plan.shape, row_begin + b, row_begin + e);
  }
}

// d_in (N,H,W,C) += col (rows, R*S*C) for output rows [row_begin, row_begin + rows); each thread
// owns a channel range, so no two threads touch the same float.
void col2im_parallel(float* d_in, const float* col, const Plan& plan, int64_t row_begin,
                     int64_t rows) {
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int c0 = int(split(plan.shape.C, t, nt)), c1 = int(split(plan.shape.C, t + 1, nt));
    kernels::col2im_nhwc_add(d_in, col, plan.shape, row_begin, row_begin + rows, c0, c1);
  }
}

// The forward and backward-data GEMMs against the weights: fp32 through the BLAS wrapper when
// words is null, else bf16 against the weights' words packed once per call (kernels/bf16.hpp).
void gemm_weights(const uint32_t* words, Trans trans_a, Trans trans_b, int M, int N, int K,
                  float alpha, const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc, kernels::Bf16Engine engine) {
  if (words)
    kernels::gemm_bf16_packed(trans_a, M, N, K, alpha, A, lda, words, beta, C, ldc, engine);
  else
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// bf16: the weights' words at the end of the packed-weight region; null in fp32.
uint32_t* weight_words(float* scratch, const Plan& plan) {
  if (plan.word_floats == 0) return nullptr;
  return reinterpret_cast<uint32_t*>(scratch + plan.pack_floats - plan.word_floats);
}

// bf16 operands (an output gradient, input activations) are for the bf16 GEMM path only (the
// fp32 GEMM and the direct kernels read fp32).
void check_bf16_operands(const ConvGeometry& g, const ConvOptions& options) {
  NOSTRUM_CHECK(
      !(options.d_out_bf16 || options.in_bf16) || options.precision == kernels::Precision::kBf16,
      ShapeError, "bf16 operands need bf16 precision", describe(g));
}

// The column region of a tile as bf16 values (they take half of its bytes).
uint16_t* bf16_columns(float* column) {
  return reinterpret_cast<uint16_t*>(column);
}

void zero_parallel(float* p, int64_t count) {
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b = split(count, t, nt), e = split(count, t + 1, nt);
    std::memset(p + b, 0, size_t(e - b) * sizeof(float));
  }
}

}  // namespace

size_t conv2d_scratch_floats(const ConvGeometry& g, const ConvOptions& options) {
  const Plan plan = make_plan(g, options);
  return plan.pack_floats + plan.column_floats;
}

size_t conv2d_scratch_floats(const ConvGeometry& g) {
  return conv2d_scratch_floats(g, {});
}

void conv2d_forward(float* out, const float* in, const float* weight, const ConvGeometry& g,
                    float* scratch, const ConvOptions& options) {
  const Plan plan = make_plan(g, options);
  check_bf16_operands(g, options);
  if (use_direct(g, Pass::kForward, options.algorithm, options.precision)) {
    kernels::direct_conv_forward(out, in, weight, g, scratch);
    return;
  }
  const int threads = omp_get_max_threads();
  const int K = g.K;
  const int64_t L = plan.row_length;
  float* column = scratch + plan.pack_floats;
  const float* packed = weight;  // (K, R*S*C)
  if (plan.pack) {
    kernels::pack_conv_weight(scratch, weight, g.K, g.C, g.R, g.S);
    packed = scratch;
  }
  uint32_t* words = weight_words(scratch, plan);  // bf16: op(B) = packed^T (R*S*C x K)
  if (words) kernels::bf16_pack_b(words, Trans::kYes, packed, int(L), int(L), K);
  const ConvThreading mode = choose(plan, Pass::kForward, threads, options.threading);
  const uint16_t* in_bf16 = options.in_bf16;
  // out rows [r0, r0 + n) = a (n, R*S*C) x packed^T; a holds fp32 or (handed over) bf16 values.
  const auto product = [&](const auto* a, int64_t r0, int64_t n) {
    if constexpr (std::is_same_v<decltype(a), const uint16_t*>)
      kernels::gemm_bf16_packed(Trans::kNo, int(n), K, int(L), 1.0f, a, int(L), words, 0.0f,
                                out + r0 * K, K, options.bf16_engine);
    else
      gemm_weights(words, Trans::kNo, Trans::kYes, int(n), K, int(L), 1.0f, a, int(L), packed,
                   int(L), 0.0f, out + r0 * K, K, options.bf16_engine);
  };

  if (mode == ConvThreading::kSharedGemm) {
    if (plan.direct) {
      if (in_bf16)
        product(in_bf16, 0, plan.rows);
      else
        product(in, 0, plan.rows);
      return;
    }
    for (int64_t r0 = 0; r0 < plan.rows; r0 += plan.shared_tile_rows) {
      const int64_t n = std::min(plan.shared_tile_rows, plan.rows - r0);
      if (in_bf16) {
        uint16_t* col = bf16_columns(column);
        im2col_parallel(col, in_bf16, plan, r0, n);
        product(static_cast<const uint16_t*>(col), r0, n);
      } else {
        im2col_parallel(column, in, plan, r0, n);
        product(static_cast<const float*>(column), r0, n);
      }
    }
    return;
  }

  // Fixed tiles, handed out dynamically: a row's result does not depend on which thread ran it.
  const int64_t tile =
      balanced_piece(plan.rows, per_thread_tile_rows(plan, Pass::kForward, threads), threads);
  const int64_t tiles = (plan.rows + tile - 1) / tile;
#pragma omp parallel num_threads(threads)
  {
    float* my_column = plan.direct ? nullptr : column + omp_get_thread_num() * tile * L;
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t r0 = i * tile, n = std::min(tile, plan.rows - r0);
      if (in_bf16) {
        const uint16_t* a = in_bf16 + r0 * L;  // direct: the activations are the columns
        if (!plan.direct) {
          kernels::im2col_nhwc(bf16_columns(my_column), in_bf16, plan.shape, r0, r0 + n);
          a = bf16_columns(my_column);
        }
        product(a, r0, n);
      } else {
        const float* a = in + r0 * L;
        if (!plan.direct) {
          kernels::im2col_nhwc(my_column, in, plan.shape, r0, r0 + n);
          a = my_column;
        }
        product(a, r0, n);
      }
    }
  }
}

void conv2d_forward(float* out, const float* in, const float* weight, const ConvGeometry& g,
                    float* scratch) {
  conv2d_forward(out, in, weight, g, scratch, {});
}

bool conv2d_weight_gradient_input_rows_fits(const ConvGeometry& g) {
  return g.K < g.C * g.R * g.S;
}

void conv2d_backward_weights(float* d_weight, const float* d_out, const float* in,
                             const ConvGeometry& g, float* scratch, const ConvOptions& options) {
  const Plan plan = make_plan(g, options);
  check_bf16_operands(g, options);
  if (use_direct(g, Pass::kBackwardWeights, options.algorithm, options.precision)) {
    kernels::direct_conv_backward_weights(d_weight, d_out, in, g);
    return;
  }
  const int threads = omp_get_max_threads();
  const int K = g.K;
  const int64_t L = plan.row_length;
  float* column = scratch + plan.pack_floats;
  // d_packed (K, R*S*C) = d_out^T (K, rows) x columns (rows, R*S*C).
  float* d_packed = plan.pack ? scratch : d_weight;
  const ConvThreading mode = choose(plan, Pass::kBackwardWeights, threads, options.threading);
  const uint16_t* in_bf16 = options.in_bf16;
  // c (K, R*S*C) (+)= d_out^T of rows [r0, r0 + n) x b (n, R*S*C); b holds fp32 or (handed over)
  // bf16 values, d_out likewise.
  const auto product = [&](int64_t r0, int64_t n, const auto* b, float beta, float* c) {
    if (options.d_out_bf16)
      kernels::gemm_bf16(Trans::kYes, Trans::kNo, K, int(L), int(n), 1.0f,
                         options.d_out_bf16 + r0 * K, K, b, int(L), beta, c, int(L),
                         options.bf16_engine);
    else if constexpr (std::is_same_v<decltype(b), const uint16_t*>)
      kernels::gemm_bf16(Trans::kYes, Trans::kNo, K, int(L), int(n), 1.0f, d_out + r0 * K, K, b,
                         int(L), beta, c, int(L), options.bf16_engine);
    else if (options.nostrum_fp32_gemm && options.precision == kernels::Precision::kFp32)
      kernels::gemm_fp32_tn(K, int(L), int(n), d_out + r0 * K, K, b, int(L), beta, c, int(L));
    else
      gemm(options.precision, Trans::kYes, Trans::kNo, K, int(L), int(n), 1.0f, d_out + r0 * K, K,
           b, int(L), beta, c, int(L), options.bf16_engine);
  };

  if (mode == ConvThreading::kSharedGemm) {
    if (plan.direct) {
      if (in_bf16)
        product(0, plan.rows, in_bf16, 0.0f, d_packed);
      else
        product(0, plan.rows, in, 0.0f, d_packed);
    } else {
      for (int64_t r0 = 0; r0 < plan.rows; r0 += plan.shared_tile_rows) {
        const int64_t n = std::min(plan.shared_tile_rows, plan.rows - r0);
        const float beta = r0 == 0 ? 0.0f : 1.0f;
        if (in_bf16) {
          uint16_t* col = bf16_columns(column);
          im2col_parallel(col, in_bf16, plan, r0, n);
          product(r0, n, static_cast<const uint16_t*>(col), beta, d_packed);
        } else {
          im2col_parallel(column, in, plan, r0, n);
          product(r0, n, static_cast<const float*>(column), beta, d_packed);
        }
      }
    }
  } else {
    // Each thread sums its rows into its own partial; the partials are then added in thread order,
    // so the result is the same bits for the same thread count.
    const int64_t tile =
        plan.direct ? plan.rows : per_thread_tile_rows(plan, Pass::kBackwardWeights, threads);
    float* tiles = column + size_t(threads) * plan.partial_floats;
    const int64_t count = int64_t(K) * L;
    // ConvOptions::weight_gradient_input_rows: each partial is d_weight^T (L, K), the input's
    // columns (the input itself for a 1x1 stride-1 conv, im2col's tile otherwise) as the GEMM's
    // rows.
    const bool input_rows =
        options.weight_gradient_input_rows && conv2d_weight_gradient_input_rows_fits(g) &&
        (options.precision == kernels::Precision::kBf16 || options.nostrum_fp32_gemm);
    // c (L, K) (+)= a^T x d_out of rows [r0, r0 + n): a the input's columns of those rows (bf16 or
    // fp32), d_out in bf16 or fp32; in kFp32, both fp32 on nostrum's fp32 GEMM.
    const auto product_input_rows = [&](int64_t r0, int64_t n, const auto* a, float beta,
                                        float* c) {
      if constexpr (std::is_same_v<decltype(a), const float*>) {
        if (options.precision == kernels::Precision::kFp32) {
          kernels::gemm_fp32_tn(int(L), K, int(n), a, int(L), d_out + r0 * K, K, beta, c, K);
          return;
        }
      }
      if (options.d_out_bf16)
        kernels::gemm_bf16(Trans::kYes, Trans::kNo, int(L), K, int(n), 1.0f, a, int(L),
                           options.d_out_bf16 + r0 * K, K, beta, c, K, options.bf16_engine);
      else
        kernels::gemm_bf16(Trans::kYes, Trans::kNo, int(L), K, int(n), 1.0f, a, int(L),
                           d_out + r0 * K, K, beta, c, K, options.bf16_engine);
    };
    // A thread's partial (+)= the product of rows [r0, r0 + n), b their columns, in the
    // orientation the options ask for.
    const auto partial_product = [&](int64_t r0, int64_t n, const auto* b, float beta,
                                     float* partial) {
      if (input_rows)
        product_input_rows(r0, n, b, beta, partial);
      else
        product(r0, n, b, beta, partial);
    };
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = split(plan.rows, t, nt), end = split(plan.rows, t + 1, nt);
      float* partial = column + size_t(t) * plan.partial_floats;
      float* my_column = plan.direct ? nullptr : tiles + t * tile * L;
      if (begin == end) std::memset(partial, 0, size_t(count) * sizeof(float));
      for (int64_t r0 = begin; r0 < end; r0 += tile) {
        const int64_t n = std::min(tile, end - r0);
        const float beta = r0 == begin ? 0.0f : 1.0f;
        if (in_bf16) {
          const uint16_t* b = in_bf16 + r0 * L;
          if (!plan.direct) {
            kernels::im2col_nhwc(bf16_columns(my_column), in_bf16, plan.shape, r0, r0 + n);
            b = bf16_columns(my_column);
          }
          partial_product(r0, n, b, beta, partial);
        } else {
          const float* b = in + r0 * L;
          if (!plan.direct) {
            kernels::im2col_nhwc(my_column, in, plan.shape, r0, r0 + n);
            b = my_column;
          }
          partial_product(r0, n, b, beta, partial);
        }
      }
#pragma omp barrier
      // d_packed[i] = the partials' sum at j, in thread order.
      const auto sum_partials = [&](int64_t i, int64_t j) {
        float sum = column[j];
        for (int u = 1; u < nt; ++u) sum += column[size_t(u) * plan.partial_floats + j];
        d_packed[i] = sum;
      };
      if (input_rows) {
        // d_packed (K, L) from partials (L, K), 16 of their rows at a time: those rows stay in
        // cache while each k writes one run of 16 values (element by element, every read of a
        // partial fell on another line).
        constexpr int64_t kRows = 16;
        const int64_t blocks = (L + kRows - 1) / kRows;
        for (int64_t blk = split(blocks, t, nt); blk < split(blocks, t + 1, nt); ++blk) {
          const int64_t l0 = blk * kRows, l1 = std::min(L, l0 + kRows);
          for (int64_t k = 0; k < K; ++k)
            for (int64_t l = l0; l < l1; ++l) sum_partials(k * L + l, l * K + k);
        }
      } else {
        for (int64_t i = split(count, t, nt); i < split(count, t + 1, nt); ++i) sum_partials(i, i);
      }
    }
  }
  if (plan.pack) kernels::unpack_conv_weight(d_weight, d_packed, g.K, g.C, g.R, g.S);
}

void conv2d_backward_data(float* d_in, const float* d_out, const float* weight,
                          const ConvGeometry& g, float* scratch, const ConvOptions& options) {
  const Plan plan = make_plan(g, options);
  check_bf16_operands(g, options);
  if (use_direct(g, Pass::kBackwardData, options.algorithm, options.precision)) {
    kernels::direct_conv_backward_data(d_in, d_out, weight, g, scratch, options.accumulate_d_in);
    return;
  }
  const int threads = omp_get_max_threads();
  const int K = g.K;
  const int64_t L = plan.row_length;
  float* column = scratch + plan.pack_floats;
  // columns (rows, R*S*C) = d_out (rows, K) x packed (K, R*S*C), scattered back into d_in.
  const float* packed = weight;
  if (plan.pack) {
    kernels::pack_conv_weight(scratch, weight, g.K, g.C, g.R, g.S);
    packed = scratch;
  }
  uint32_t* words = weight_words(scratch, plan);  // bf16: op(B) = packed (K x R*S*C)
  if (words) kernels::bf16_pack_b(words, Trans::kNo, packed, int(L), K, int(L));
  const ConvThreading mode = choose(plan, Pass::kBackwardData, threads, options.threading);
  const bool accumulate = options.accumulate_d_in;  // d_in += rather than =: no zero-fill at all
  const float beta = accumulate ? 1.0f : 0.0f;
  // c (n, R*S*C) (+)= d_out of rows [r0, r0 + n) x packed.
  const auto product = [&](int64_t r0, int64_t n, float c_beta, float* c) {
    if (options.d_out_bf16)
      kernels::gemm_bf16_packed(Trans::kNo, int(n), int(L), K, 1.0f, options.d_out_bf16 + r0 * K, K,
                                words, c_beta, c, int(L), options.bf16_engine);
    else
      gemm_weights(words, Trans::kNo, Trans::kNo, int(n), int(L), K, 1.0f, d_out + r0 * K, K,
                   packed, int(L), c_beta, c, int(L), options.bf16_engine);
  };
  if (plan.direct) {
    if (mode == ConvThreading::kSharedGemm) {
      product(0, plan.rows, beta, d_in);
      return;
    }
    const int64_t tile = balanced_piece(
        plan.rows, per_thread_tile_rows(plan, Pass::kBackwardData, threads), threads);
    const int64_t tiles = (plan.rows + tile - 1) / tile;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t r0 = i * tile, n = std::min(tile, plan.rows - r0);
      product(r0, n, beta, d_in + r0 * L);
    }
    return;
  }

  const int64_t pixels_per_image = int64_t(g.H) * g.W * g.C;
  const int64_t rows_per_image = int64_t(plan.shape.P) * plan.shape.Q;
  if (mode == ConvThreading::kSharedGemm) {
    if (!accumulate) zero_parallel(d_in, int64_t(g.N) * pixels_per_image);
    for (int64_t r0 = 0; r0 < plan.rows; r0 += plan.shared_tile_rows) {
      const int64_t n = std::min(plan.shared_tile_rows, plan.rows - r0);
      product(r0, n, 0.0f, column);
      col2im_parallel(d_in, column, plan, r0, n);
    }
    return;
  }

  // Per-thread: the unit of work is a group of whole images, so a thread's scatter into d_in never
  // meets another thread's; groups are handed out dynamically, tiles within a group in order.
  const int64_t tile = per_thread_tile_rows(plan, Pass::kBackwardData, threads);
  const int64_t images_per_unit =
      balanced_piece(g.N, std::max<int64_t>(1, tile / rows_per_image), threads);
  const int64_t units = (g.N + images_per_unit - 1) / images_per_unit;
#pragma omp parallel num_threads(threads)
  {
    float* my_column = column + omp_get_thread_num() * tile * L;
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n0 = u * images_per_unit, n1 = std::min<int64_t>(g.N, n0 + images_per_unit);
      if (!accumulate)
        std::memset(d_in + n0 * pixels_per_image, 0,
                    size_t((n1 - n0) * pixels_per_image) * sizeof(float));
      const int64_t end = n1 * rows_per_image;
      for (int64_t r0 = n0 * rows_per_image; r0 < end; r0 += tile) {
        const int64_t n = std::min(tile, end - r0);
        product(r0, n, 0.0f, my_column);
        kernels::col2im_nhwc_add(d_in, my_column, plan.shape, r0, r0 + n, 0, g.C);
      }
    }
  }
}

void conv2d_backward(float* d_in, float* d_weight, const float* d_out, const float* in,
                     const float* weight, const ConvGeometry& g, float* scratch,
                     const ConvOptions& options) {
  conv2d_backward_weights(d_weight, d_out, in, g, scratch, options);
  if (d_in != nullptr) conv2d_backward_data(d_in, d_out, weight, g, scratch, options);
}

void conv2d_backward(float* d_in, float* d_weight, const float* d_out, const float* in,
                     const float* weight, const ConvGeometry& g, float* scratch) {
  conv2d_backward(d_in, d_weight, d_out, in, weight, g, scratch, {});
}

bool conv2d_fixed_rule_direct(const ConvGeometry& g, kernels::ConvPass pass,
                              kernels::Precision precision) {
  return kernels::direct_conv_available() && use_direct(g, pass, ConvAlgorithm::kAuto, precision);
}

bool conv2d_runs_per_thread(const ConvGeometry& g, kernels::ConvPass pass, int threads,
                            const ConvOptions& options) {
  if (threads <= 1) return false;
  return per_thread_tile_rows(make_plan(g, options), pass, threads) > 0;
}

}  // namespace nostrum::layers
