// The Winograd F(2x2, 3x3) candidate (kernels/winograd_conv.hpp): per call, the filters' 16
// transforms packed as the bf16 GEMM's B; then each thread takes blocks of output tiles, and for
// each block transforms the input tiles into 16 A blocks, runs the 16 GEMMs into 16 blocks of
// sums and transforms those back into the output (the loops: winograd_avx512.cpp). The weight
// gradient transforms the tiles of the input and of the output gradient a chunk at a time (within
// the last-level cache), each chunk's 16 GEMMs, one per position, adding onto the chunks before
// (weight_gradient).
#include "nostrum/kernels/winograd_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <string>

#include "bf16_avx512.hpp"
#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "winograd_avx512.hpp"

namespace nostrum::kernels {

namespace {

using winograd_avx512::Shape;

// Tiles per block: the block's A words (16 x 2 bytes per input channel and tile) and sums (16 x
// 4 bytes per output channel and tile) within 768 KiB, three quarters of Zen 4's 1 MiB L2 and
// more than half of the Intel server cores'; a multiple of the GEMM's 14-row tiles, at most its
// 168-row block.
int tiles_per_block(const Shape& s) {
  const int tile_bytes = 16 * (2 * s.in + 4 * s.out);
  return std::clamp((768 << 10) / tile_bytes / 14 * 14, 14, bf16_avx512::kBlockRows);
}

// The weight gradient's chunks of tiles: as few as keep the input's and the output gradient's
// transforms of a chunk (16 positions, bf16) within chunk_bytes together, of equal size (an even
// number of tiles: the GEMM's reduction pairs), the last one shorter.
int64_t transformed_tile_bytes(const Shape& s) {
  return 16 * 2 * int64_t(s.in + s.out);
}
int64_t weight_gradient_chunk_tiles(const Shape& s, int64_t tiles, int64_t chunk_bytes) {
  const int64_t bytes = transformed_tile_bytes(s);
  const int64_t chunks = std::max<int64_t>(1, (tiles * bytes + chunk_bytes - 1) / chunk_bytes);
  const int64_t chunk = (tiles + chunks - 1) / chunks;
  return std::min(tiles, chunk + chunk % 2);
}
// The most tiles a chunk can hold, for any batch up to the prepared one: tiles / chunks is at
// most chunk_bytes' worth, rounded up, plus one for the even rounding.
int64_t weight_gradient_chunk_capacity(const Shape& s, int64_t tiles, int64_t chunk_bytes) {
  const int64_t bytes = transformed_tile_bytes(s);
  return std::min(tiles, (chunk_bytes + bytes - 1) / bytes + 1);
}

class PreparedWinograd final : public PreparedConv {
 public:
  PreparedWinograd(const ConvGeometry& g, ConvPass pass, int64_t chunk_bytes)
      : pass_(pass),
        chunk_bytes_(chunk_bytes),
        data_gradient_(pass == ConvPass::kBackwardData),
        threads_(omp_get_max_threads()) {
    s_.H = g.H;
    s_.W = g.W;
    s_.in = data_gradient_ ? g.K : g.C;
    s_.out = data_gradient_ ? g.C : g.K;
    if (pass == ConvPass::kBackwardWeights) {
      // The input's and the output gradient's transformed tiles for one chunk of the batch's
      // tiles, then the 16 GEMMs' sums.
      NOSTRUM_CHECK(chunk_bytes > 0, ShapeError, "a chunk budget of no bytes",
                    "winograd_bf16 weight gradient");
      chunk_capacity_ = weight_gradient_chunk_capacity(
          s_, int64_t(g.N) * s_.tiles_y() * s_.tiles_x(), chunk_bytes);
      packed_words_ = Arena::padded(size_t(16) * chunk_capacity_ * (s_.in / 2));
      a_words_ = Arena::padded(size_t(16) * chunk_capacity_ * (s_.out / 2));
      sums_floats_ = Arena::padded(size_t(16) * s_.out * s_.in);
      return;
    }
    rows_ = tiles_per_block(s_);
    blocks_ = (s_.in + 2 * bf16_avx512::kBlockPairs - 1) / (2 * bf16_avx512::kBlockPairs);
    packed_words_ = Arena::padded(size_t(16) * (s_.in / 2) * s_.out);
    a_words_ = Arena::padded(size_t(16) * blocks_ * rows_ * bf16_avx512::kBlockPairs);
    sums_floats_ = Arena::padded(size_t(16) * rows_ * s_.out);
  }
  size_t scratch_floats() const override {
    if (pass_ == ConvPass::kBackwardWeights) return packed_words_ + a_words_ + sums_floats_;
    return packed_words_ + size_t(threads_) * (a_words_ + sums_floats_);
  }
  bool takes_bf16_in() const override { return pass_ != ConvPass::kBackwardData; }
  bool takes_bf16_d_out() const override { return pass_ != ConvPass::kForward; }
  bool writes_bf16_out() const override { return pass_ == ConvPass::kForward; }

  void run(const ConvCall& c) override {
    if (pass_ == ConvPass::kBackwardWeights) return weight_gradient(c);
    uint32_t* packed = reinterpret_cast<uint32_t*>(c.scratch);
    const int pairs = s_.in / 2;
    const float* image = data_gradient_ ? c.d_out : c.in;
    const uint16_t* image_bf16 = data_gradient_ ? c.d_out_bf16 : c.in_bf16;
    float* out = data_gradient_ ? c.d_in : c.out;
    uint16_t* out_bf16 = data_gradient_ ? nullptr : c.out_bf16;
    const bool accumulate = data_gradient_ && c.accumulate_d_in;
    const int64_t tiles = int64_t(c.N) * s_.tiles_y() * s_.tiles_x();
    const int64_t block_count = (tiles + rows_ - 1) / rows_;
    const winograd_avx512::TileWords a_at = winograd_avx512::a_block_words(rows_, s_.in);
#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num(), team = omp_get_num_threads();
      // The filters' transforms, the pairs shared out (each thread its own rows of every strip).
      winograd_avx512::transform_weights(packed, c.weight, s_, data_gradient_,
                                         int(int64_t(pairs) * thread / team),
                                         int(int64_t(pairs) * (thread + 1) / team));
#pragma omp barrier
      uint32_t* a = reinterpret_cast<uint32_t*>(c.scratch + packed_words_ +
                                                size_t(thread) * (a_words_ + sums_floats_));
      float* sums = reinterpret_cast<float*>(a + a_words_);
#pragma omp for schedule(static)
      for (int64_t block = 0; block < block_count; ++block) {
        const int64_t t0 = block * rows_;
        const int n = int(std::min<int64_t>(rows_, tiles - t0));
        winograd_avx512::transform_input(a, a_at, image, image_bf16, s_, t0, n);
        for (int xi = 0; xi < 16; ++xi) {
          bf16_avx512::PackedB b;
          b.b = packed + size_t(xi) * pairs * s_.out;
          b.pairs = pairs;
          b.n_padded = s_.out;
          for (int kb = 0; kb < blocks_; ++kb) {
            const int p0 = kb * bf16_avx512::kBlockPairs;
            bf16_avx512::gemm_block(
                sums + size_t(xi) * rows_ * s_.out, s_.out,
                a + (size_t(xi) * blocks_ + kb) * rows_ * bf16_avx512::kBlockPairs, false, b, p0, 0,
                n, s_.out, std::min(bf16_avx512::kBlockPairs, pairs - p0), 1.0f, 0.0f, kb == 0);
          }
        }
        winograd_avx512::transform_output(out, out_bf16, accumulate, sums, rows_, s_, t0, n);
      }
    }
  }

 private:
  // The weight gradient: the dot products over tiles at each of the 16 positions, dU = sum over
  // tiles of (A dy A^T) V, one GEMM per position (output channels x input channels, the tiles the
  // reduction, as a 1x1 convolution's weight gradient), then d_weight = G^T dU G.
  void weight_gradient(const ConvCall& c) {
    const int64_t tiles = int64_t(c.N) * s_.tiles_y() * s_.tiles_x();
    uint32_t* v = reinterpret_cast<uint32_t*>(c.scratch);
    uint32_t* w = v + packed_words_;
    float* du = c.scratch + packed_words_ + a_words_;
    const int64_t chunk_tiles = weight_gradient_chunk_tiles(s_, tiles, chunk_bytes_);
    NOSTRUM_CHECK(chunk_tiles <= chunk_capacity_, ShapeError,
                  "a batch of " + std::to_string(c.N) + " images, more than prepared",
                  "winograd_bf16 weight gradient");
    const winograd_avx512::TileWords v_at = winograd_avx512::matrix_words(chunk_tiles, s_.in);
    const winograd_avx512::TileWords w_at = winograd_avx512::matrix_words(chunk_tiles, s_.out);
#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num(), team = omp_get_num_threads();
      // A chunk of tiles at a time (their transforms stay in the last-level cache), the GEMMs
      // adding each chunk onto the sums of the chunks before it.
      for (int64_t c0 = 0; c0 < tiles; c0 += chunk_tiles) {
        const int64_t n = std::min<int64_t>(chunk_tiles, tiles - c0);
        const int64_t t0 = c0 + n * thread / team, t1 = c0 + n * (thread + 1) / team;
        winograd_avx512::transform_input(v + (t0 - c0) * v_at.row_stride, v_at, c.in, c.in_bf16, s_,
                                         t0, int(t1 - t0));
        winograd_avx512::transform_gradient(w + (t0 - c0) * w_at.row_stride, w_at, c.d_out,
                                            c.d_out_bf16, s_, t0, int(t1 - t0));
#pragma omp barrier
        // The 16 GEMMs shared out whole, each on its thread alone, the chunks in order (the same
        // bits on any thread count).
#pragma omp for schedule(static)
        for (int xi = 0; xi < 16; ++xi)
          gemm_bf16(Trans::kYes, Trans::kNo, s_.out, s_.in, int(n), 1.0f,
                    reinterpret_cast<const uint16_t*>(w + xi * w_at.xi_stride), s_.out,
                    reinterpret_cast<const uint16_t*>(v + xi * v_at.xi_stride), s_.in,
                    c0 == 0 ? 0.0f : 1.0f, du + int64_t(xi) * s_.out * s_.in, s_.in);
      }
      winograd_avx512::transform_weight_gradient(c.d_weight, du, s_, s_.out * thread / team,
                                                 s_.out * (thread + 1) / team);
    }
  }

  ConvPass pass_;
  int64_t chunk_bytes_;
  bool data_gradient_;
  int threads_;
  Shape s_;
  int rows_ = 0, blocks_ = 0;   // tiles per block; 192-pair blocks of the input channels
  int64_t chunk_capacity_ = 0;  // the weight gradient's most tiles a chunk
  size_t packed_words_ = 0, a_words_ = 0, sums_floats_ = 0;
};

class WinogradCandidate final : public ConvCandidate {
 public:
  const char* name() const override { return "winograd_bf16"; }
  ConvRounding rounding() const override { return ConvRounding::kWinogradTransforms; }
  const char* description() const override {
    return "3x3 stride-1 pad-1 as Winograd F(2x2,3x3): 16 products per 2x2 output tile and "
           "channel instead of 36, on nostrum's bf16 GEMM (vdpbf16ps, fp32 sums; AVX512_BF16); "
           "all three passes; input channels of the pass % 32, output % 16 (weight gradient: both "
           "% 32)";
  }
  bool available(const CpuFeatures& cpu) const override { return cpu.avx512_bf16; }
  bool supports(Precision p) const override { return p == Precision::kBf16; }
  bool fits(const ConvGeometry& g, ConvPass pass) const override { return winograd_fits(g, pass); }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return prepare_winograd(g, pass, kWinogradChunkBytes);
  }
};

}  // namespace

std::unique_ptr<PreparedConv> prepare_winograd(const ConvGeometry& g, ConvPass pass,
                                               int64_t weight_gradient_chunk_bytes) {
  NOSTRUM_CHECK(winograd_fits(g, pass), ShapeError,
                std::string("not a 3x3 stride-1 pad-1 pass with its channels in 32s: ") +
                    conv_pass_name(pass) + " " + conv_shape_name(g),
                "winograd_bf16");
  return std::make_unique<PreparedWinograd>(g, pass, weight_gradient_chunk_bytes);
}

bool winograd_fits(const ConvGeometry& g, ConvPass pass) {
  if (g.R != 3 || g.S != 3 || g.stride != 1 || g.pad != 1) return false;
  const int in = pass == ConvPass::kBackwardData ? g.K : g.C;
  const int out = pass == ConvPass::kBackwardData ? g.C : g.K;
  return in % 32 == 0 && out % (pass == ConvPass::kBackwardWeights ? 32 : 16) == 0;
}

const ConvCandidate& winograd_bf16_candidate() {
  static const WinogradCandidate c;
  return c;
}

}  // namespace nostrum::kernels
