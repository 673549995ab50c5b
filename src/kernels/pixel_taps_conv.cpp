// The pixel-taps convolution candidates (kernels/pixel_taps_conv.hpp): on small output maps, each
// output pixel's forward is a GEMM per tap that reads an input pixel inside the image (batch rows
// x C, the weights' tap C x K), summed into the pixel's output rows; each input pixel's data
// gradient the GEMMs of the output pixels that read it (batch rows x K against the tap's K x C);
// each tap's weight gradient one GEMM over the batch rows of every pixel that reads an input pixel
// through it. No products on padding, no im2col: the operands are the activations' own rows
// (strided by the image) and the weights packed once per call, as the im2col GEMM packs them.
#include "nostrum/kernels/pixel_taps_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/im2col.hpp"
#include "nostrum/kernels/thread_owners.hpp"

namespace nostrum::kernels {

namespace {

// Whether a convolution has products on padding at all (a kernel wider than 1 and padding) and
// at most kPixelTapsMaxPixels output pixels (every pass).
bool pixel_taps_fit(const ConvGeometry& g) {
  const int P = g.P(), Q = g.Q();
  return g.R * g.S > 1 && g.pad > 0 && P >= 1 && Q >= 1 && P * Q <= kPixelTapsMaxPixels;
}

// A tap that reads inside the image: the tap (r * S + s), the output pixel (oy * Q + ox) and the
// input pixel (iy * W + ix).
struct Link {
  int tap, out_pixel, in_pixel;
};

class PreparedPixelTaps final : public PreparedConv {
 public:
  // Every (tap, output pixel, input pixel) that reads inside the image, grouped by what the pass
  // computes: the output pixel (forward), the input pixel (data gradient), the tap (weight
  // gradient); each group's GEMM count is its weight in the threads' shares.
  PreparedPixelTaps(const ConvGeometry& g, ConvPass pass, Precision precision)
      : g_(g), pass_(pass), bf16_(precision == Precision::kBf16), threads_(omp_get_max_threads()) {
    const int P = g.P(), Q = g.Q(), T = g.R * g.S;
    groups_.resize(pass == ConvPass::kForward        ? size_t(P) * Q
                   : pass == ConvPass::kBackwardData ? size_t(g.H) * g.W
                                                     : size_t(T));
    tap_used_.assign(size_t(T), false);
    for (int oy = 0; oy < P; ++oy)
      for (int ox = 0; ox < Q; ++ox)
        for (int r = 0; r < g.R; ++r)
          for (int s = 0; s < g.S; ++s) {
            const int iy = oy * g.stride - g.pad + r, ix = ox * g.stride - g.pad + s;
            if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
            const Link l{r * g.S + s, oy * Q + ox, iy * g.W + ix};
            tap_used_[size_t(l.tap)] = true;
            groups_[size_t(pass == ConvPass::kForward        ? l.out_pixel
                           : pass == ConvPass::kBackwardData ? l.in_pixel
                                                             : l.tap)]
                .push_back(l);
          }
    size_t most_links = 0;
    std::vector<int> work;  // each group's GEMM count (at least 1)
    for (const auto& links : groups_) {
      work.push_back(std::max<int>(1, int(links.size())));
      most_links = std::max(most_links, links.size());
    }
    owner_ = thread_owners(work, threads_);
    packed_floats_ = Arena::padded(size_t(g.K) * T * g.C);
    if (pass == ConvPass::kBackwardWeights)  // a thread's gathered rows of both operands
      extra_floats_ = size_t(threads_) * Arena::padded(most_links * g.N * (g.K + g.C));
    else if (bf16_)  // each tap's B words: the forward's (C x K), the data gradient's (K x C)
      extra_floats_ = size_t(T) * tap_words();
  }

  size_t scratch_floats() const override { return packed_floats_ + extra_floats_; }
  bool takes_bf16_in() const override { return bf16_ && pass_ != ConvPass::kBackwardData; }
  bool takes_bf16_d_out() const override { return bf16_ && pass_ != ConvPass::kForward; }

  void run(const ConvCall& c) override {
    switch (pass_) {
      case ConvPass::kForward:
      case ConvPass::kBackwardData:
        return sum_tap_products(c);
      case ConvPass::kBackwardWeights:
        return backward_weights(c);
    }
  }

 private:
  // The thread that computes group q in a region of nt threads: the balanced assignment, or where
  // the region got another count than prepared for, the groups dealt round.
  int owner(int q, int nt) const { return nt == threads_ ? owner_[size_t(q)] : q % nt; }

  // Words of one tap's packed B (bf16).
  size_t tap_words() const {
    const bool data_gradient = pass_ == ConvPass::kBackwardData;
    return Arena::padded(data_gradient ? bf16_packed_b_words(g_.K, g_.C)
                                       : bf16_packed_b_words(g_.C, g_.K));
  }

  // The forward (out (N, P, Q, K)) or the data gradient (d_in (N, H, W, C) =, or += with
  // accumulate_d_in): group by group (the output pixels; the input pixels), the GEMMs
  // of the group's links summed into its rows (batch rows, an image apart). The forward multiplies
  // the input rows (C wide) by each tap's C x K, the data gradient the output gradient's rows (K
  // wide) by each tap's K x C. A group without links (every tap on padding; an input pixel no tap
  // reads) gets zero, or keeps its value when adding onto it.
  void sum_tap_products(const ConvCall& c) {
    const ConvGeometry& g = g_;
    const bool data_gradient = pass_ == ConvPass::kBackwardData;
    const int T = g.R * g.S;
    const int row_len = T * g.C;
    const Trans trans_b = data_gradient ? Trans::kNo : Trans::kYes;
    const int k = data_gradient ? g.K : g.C, n = data_gradient ? g.C : g.K;
    const int ld_in = g.H * g.W * g.C, ld_out = g.P() * g.Q() * g.K;
    const int lda = data_gradient ? ld_out : ld_in, ldc = data_gradient ? ld_in : ld_out;
    const float* a_fp32 = data_gradient ? c.d_out : c.in;
    const uint16_t* a_bf16 = data_gradient ? c.d_out_bf16 : c.in_bf16;
    float* rows = data_gradient ? c.d_in : c.out;
    const bool accumulate = data_gradient && c.accumulate_d_in;
    float* packed = c.scratch;  // (K, R*S*C): tap t's (K, C) at column t*C
    pack_conv_weight(packed, c.weight, g.K, g.C, g.R, g.S);
    uint32_t* words = bf16_ ? reinterpret_cast<uint32_t*>(c.scratch + packed_floats_) : nullptr;
    const size_t words_per_tap = bf16_ ? tap_words() : 0;
    if (bf16_)
      for (int t = 0; t < T; ++t)
        if (tap_used_[size_t(t)])
          bf16_pack_b(words + size_t(t) * words_per_tap, trans_b, packed + int64_t(t) * g.C,
                      row_len, k, n);
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      for (int q = 0; q < int(groups_.size()); ++q) {
        if (owner(q, nt) != t) continue;
        float* out = rows + int64_t(q) * n;
        const std::vector<Link>& links = groups_[size_t(q)];
        if (links.empty() && !accumulate)
          for (int i = 0; i < c.N; ++i)
            std::memset(out + int64_t(i) * ldc, 0, size_t(n) * sizeof(float));
        for (size_t i = 0; i < links.size(); ++i) {
          const Link& l = links[i];
          const float beta = i == 0 && !accumulate ? 0.0f : 1.0f;
          const int64_t at = int64_t(data_gradient ? l.out_pixel : l.in_pixel) * k;
          const uint32_t* tap_words = bf16_ ? words + size_t(l.tap) * words_per_tap : nullptr;
          if (!bf16_)
            gemm(Trans::kNo, trans_b, c.N, n, k, 1.0f, a_fp32 + at, lda,
                 packed + int64_t(l.tap) * g.C, row_len, beta, out, ldc);
          else if (a_bf16)
            gemm_bf16_packed(Trans::kNo, c.N, n, k, 1.0f, a_bf16 + at, lda, tap_words, beta, out,
                             ldc);
          else
            gemm_bf16_packed(Trans::kNo, c.N, n, k, 1.0f, a_fp32 + at, lda, tap_words, beta, out,
                             ldc);
        }
      }
    }
  }

  // d_weight (K, C, R, S): tap by tap, d_out's rows (K wide) of its pixels against the input's rows
  // (C wide) they read, gathered into one reduction over (pixel, image), written into the tap's
  // columns of a (K, R*S*C) matrix, which is then put into PyTorch's layout.
  void backward_weights(const ConvCall& c) {
    const ConvGeometry& g = g_;
    const int T = g.R * g.S;
    const int64_t row_len = int64_t(T) * g.C;
    float* d_packed = c.scratch;
    const int64_t ld_in = int64_t(g.H) * g.W * g.C, ld_out = int64_t(g.P()) * g.Q() * g.K;
#pragma omp parallel num_threads(threads_)
    {
      const int th = omp_get_thread_num(), nt = omp_get_num_threads();
      float* gather = c.scratch + packed_floats_ + size_t(th) * (extra_floats_ / size_t(threads_));
      for (int t = 0; t < T; ++t) {
        if (owner(t, nt) != th) continue;
        const std::vector<Link>& links = groups_[size_t(t)];
        float* d_tap = d_packed + int64_t(t) * g.C;
        if (links.empty()) {  // the tap reads only padding: no gradient
          for (int k = 0; k < g.K; ++k)
            std::memset(d_tap + k * row_len, 0, size_t(g.C) * sizeof(float));
          continue;
        }
        const int rows = int(links.size()) * c.N;
        // Row (link, image) of the output gradient and of the input, gathered.
        const auto gathered = [&](const auto* d_out, const auto* in) {
          using D = std::remove_const_t<std::remove_pointer_t<decltype(d_out)>>;
          using X = std::remove_const_t<std::remove_pointer_t<decltype(in)>>;
          D* a = reinterpret_cast<D*>(gather);
          X* b = reinterpret_cast<X*>(gather + size_t(rows) * g.K);
          for (size_t i = 0; i < links.size(); ++i)
            for (int n = 0; n < c.N; ++n) {
              const int64_t row = int64_t(i) * c.N + n;
              std::memcpy(a + row * g.K, d_out + n * ld_out + int64_t(links[i].out_pixel) * g.K,
                          size_t(g.K) * sizeof(D));
              std::memcpy(b + row * g.C, in + n * ld_in + int64_t(links[i].in_pixel) * g.C,
                          size_t(g.C) * sizeof(X));
            }
          // fp32 operands on the fp32 candidate only: a bf16 operand is handed to a bf16 one.
          if constexpr (std::is_same_v<D, float> && std::is_same_v<X, float>)
            if (!bf16_)
              return gemm(Trans::kYes, Trans::kNo, g.K, g.C, rows, 1.0f, a, g.K, b, g.C, 0.0f,
                          d_tap, int(row_len));
          gemm_bf16(Trans::kYes, Trans::kNo, g.K, g.C, rows, 1.0f, a, g.K, b, g.C, 0.0f, d_tap,
                    int(row_len));
        };
        if (c.d_out_bf16 && c.in_bf16)
          gathered(c.d_out_bf16, c.in_bf16);
        else if (c.d_out_bf16)
          gathered(c.d_out_bf16, c.in);
        else if (c.in_bf16)
          gathered(c.d_out, c.in_bf16);
        else
          gathered(c.d_out, c.in);
      }
    }
    unpack_conv_weight(c.d_weight, d_packed, g.K, g.C, g.R, g.S);
  }

  ConvGeometry g_;
  ConvPass pass_;
  bool bf16_;
  int threads_;
  std::vector<std::vector<Link>> groups_;  // the pass's groups of links (see the constructor)
  std::vector<int> owner_;                 // the thread of threads_ that computes each group
  std::vector<bool> tap_used_;             // taps that read inside the image somewhere
  size_t packed_floats_ = 0;               // the (K, R*S*C) weights or weight gradient
  size_t extra_floats_ = 0;                // the bf16 B words, or the gathers (all threads)
};

class PixelTapsCandidate final : public ConvCandidate {
 public:
  PixelTapsCandidate(const char* name, const char* description, Precision precision)
      : name_(name), description_(description), precision_(precision) {}
  const char* name() const override { return name_; }
  const char* description() const override { return description_; }
  bool available(const CpuFeatures& cpu) const override {
    return precision_ == Precision::kFp32 || cpu.avx512_bf16;
  }
  bool supports(Precision p) const override { return p == precision_; }
  bool fits(const ConvGeometry& g, ConvPass) const override { return pixel_taps_fit(g); }
  std::unique_ptr<PreparedConv> prepare(const ConvGeometry& g, ConvPass pass,
                                        Precision) const override {
    return std::make_unique<PreparedPixelTaps>(g, pass, precision_);
  }

 private:
  const char* name_;
  const char* description_;
  Precision precision_;
};

}  // namespace

const ConvCandidate& pixel_taps_fp32_candidate() {
  static const PixelTapsCandidate c(
      "pixel_taps_openblas",
      "small maps (at most 64 output pixels, a kernel wider than 1, padding): per output pixel "
      "one OpenBLAS SGEMM per tap inside the image, no products on padding; fp32; all three "
      "passes",
      Precision::kFp32);
  return c;
}

const ConvCandidate& pixel_taps_bf16_candidate() {
  static const PixelTapsCandidate c(
      "pixel_taps_bf16",
      "small maps as pixel_taps_openblas, on nostrum's bf16 GEMM (vdpbf16ps, fp32 sums; "
      "AVX512_BF16); all three passes",
      Precision::kBf16);
  return c;
}

}  // namespace nostrum::kernels
