// Conv2d (NHWC, OIHW weights) against a naive float64 7-loop reference, forward and both gradients,
// for every threading mode and tile size, plus central-difference checks of the gradients.
#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "isa_cap_env.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/direct_conv.hpp"
#include "nostrum/layers/conv2d.hpp"

using nostrum::layers::ConvAlgorithm;
using nostrum::layers::ConvGeometry;
using nostrum::layers::ConvOptions;
using nostrum::layers::ConvThreading;

namespace {

constexpr double kUnit = 1.0 / (1 << 24);  // fp32 unit roundoff

ConvGeometry geometry(int N, int H, int W, int C, int K, int R, int S, int stride, int pad) {
  ConvGeometry g;
  g.N = N, g.H = H, g.W = W, g.C = C, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}

std::string name(const ConvGeometry& g) {
  return "N" + std::to_string(g.N) + " H" + std::to_string(g.H) + " W" + std::to_string(g.W) +
         " C" + std::to_string(g.C) + " K" + std::to_string(g.K) + " " + std::to_string(g.R) + "x" +
         std::to_string(g.S) + " stride " + std::to_string(g.stride) + " pad " +
         std::to_string(g.pad);
}

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// A value with the sum of |terms| that formed it: fp32 summation of n terms in any order is within
// n * unit * abs_sum of the exact value (the classic gamma_n bound, FMA or not).
struct Exact {
  std::vector<double> value, abs_sum;
  int terms = 0;
  explicit Exact(size_t n) : value(n, 0.0), abs_sum(n, 0.0) {}
};

size_t in_index(const ConvGeometry& g, int n, int h, int w, int c) {
  return ((size_t(n) * g.H + h) * g.W + w) * g.C + c;
}
size_t w_index(const ConvGeometry& g, int k, int c, int r, int s) {
  return ((size_t(k) * g.C + c) * g.R + r) * g.S + s;
}
size_t out_index(const ConvGeometry& g, int n, int p, int q, int k) {
  return ((size_t(n) * g.P() + p) * g.Q() + q) * g.K + k;
}

// The naive reference: forward, d_in and d_weight in float64, one visit per (n,p,q,k,c,r,s).
struct Reference {
  Exact out, d_in, d_weight;
  Reference(const ConvGeometry& g, const std::vector<float>& in, const std::vector<float>& weight,
            const std::vector<float>& d_out)
      : out(size_t(g.N) * g.P() * g.Q() * g.K), d_in(in.size()), d_weight(weight.size()) {
    for (int n = 0; n < g.N; ++n)
      for (int p = 0; p < g.P(); ++p)
        for (int q = 0; q < g.Q(); ++q)
          for (int k = 0; k < g.K; ++k)
            for (int c = 0; c < g.C; ++c)
              for (int r = 0; r < g.R; ++r)
                for (int s = 0; s < g.S; ++s) {
                  const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
                  if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
                  const size_t i = in_index(g, n, h, w, c), j = w_index(g, k, c, r, s),
                               o = out_index(g, n, p, q, k);
                  const double x = in[i], wt = weight[j], dy = d_out[o];
                  out.value[o] += x * wt;
                  out.abs_sum[o] += std::abs(x * wt);
                  d_in.value[i] += dy * wt;
                  d_in.abs_sum[i] += std::abs(dy * wt);
                  d_weight.value[j] += dy * x;
                  d_weight.abs_sum[j] += std::abs(dy * x);
                }
    out.terms = g.C * g.R * g.S;
    d_in.terms = g.K * g.R * g.S;
    d_weight.terms = g.N * g.P() * g.Q();
  }
};

// Every element within the fp32 error bound of its exact value (plus a few ulps of slack for the
// operations the bound does not count).
void require_close(const std::vector<float>& got, const Exact& ref, const std::string& what) {
  REQUIRE(got.size() == ref.value.size());
  size_t worst = 0;
  double worst_ratio = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = (ref.terms + 4) * kUnit * ref.abs_sum[i] + 1e-30;
    const double err = std::abs(double(got[i]) - ref.value[i]);
    const double ratio =
        std::isfinite(got[i]) ? err / tol : std::numeric_limits<double>::infinity();
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  INFO(what << ": worst element " << worst << " got " << got[worst] << " want " << ref.value[worst]
            << " (error / bound " << worst_ratio << ")");
  REQUIRE(worst_ratio <= 1.0);
}

// Runs forward and backward with exactly conv2d_scratch_floats of scratch, followed by a guard
// region that must come back untouched; outputs start as NaN so that "overwritten" is checked.
struct Run {
  std::vector<float> out, d_in, d_weight;
};

Run run_conv(const ConvGeometry& g, const std::vector<float>& in, const std::vector<float>& weight,
             const std::vector<float>& d_out, const ConvOptions& options, bool want_d_in = true) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t scratch_floats = nostrum::layers::conv2d_scratch_floats(g, options);
  constexpr size_t kGuard = 64;
  std::vector<float> scratch(scratch_floats + kGuard, 12345.0f);
  Run run;
  run.out.assign(size_t(g.N) * g.P() * g.Q() * g.K, nan);
  run.d_in.assign(in.size(), nan);
  run.d_weight.assign(weight.size(), nan);
  nostrum::layers::conv2d_forward(run.out.data(), in.data(), weight.data(), g, scratch.data(),
                                  options);
  nostrum::layers::conv2d_backward(want_d_in ? run.d_in.data() : nullptr, run.d_weight.data(),
                                   d_out.data(), in.data(), weight.data(), g, scratch.data(),
                                   options);
  for (size_t i = scratch_floats; i < scratch.size(); ++i) REQUIRE(scratch[i] == 12345.0f);
  return run;
}

// Random input (N,H,W,C), weight (K,C,R,S) and output gradient (N,P,Q,K) for g, in that order.
struct Tensors {
  std::vector<float> in, weight, d_out;
};
Tensors random_tensors(const ConvGeometry& g, std::mt19937& rng) {
  Tensors t;
  t.in = random_vector(size_t(g.N) * g.H * g.W * g.C, rng);
  t.weight = random_vector(size_t(g.K) * g.C * g.R * g.S, rng);
  t.d_out = random_vector(size_t(g.N) * g.P() * g.Q() * g.K, rng);
  return t;
}

// forward, d_in and d_weight of a run, each within the fp32 bound of the reference.
void require_run_close(const Run& run, const Reference& ref, const std::string& what) {
  require_close(run.out, ref.out, what + ": forward");
  require_close(run.d_in, ref.d_in, what + ": d_in");
  require_close(run.d_weight, ref.d_weight, what + ": d_weight");
}

// accumulate_d_in: d_in += the gradient, onto whatever (random) values d_in held.
void require_accumulated_d_in(const ConvGeometry& g, const std::vector<float>& weight,
                              const std::vector<float>& d_out, const Reference& ref,
                              ConvOptions options, std::mt19937& rng, const std::string& what) {
  options.accumulate_d_in = true;
  std::vector<float> acc = random_vector(ref.d_in.value.size(), rng);
  Exact want = ref.d_in;
  want.terms += 1;
  for (size_t i = 0; i < acc.size(); ++i) {
    want.value[i] += acc[i];
    want.abs_sum[i] += std::abs(acc[i]);
  }
  std::vector<float> scratch(nostrum::layers::conv2d_scratch_floats(g, options));
  nostrum::layers::conv2d_backward_data(acc.data(), d_out.data(), weight.data(), g, scratch.data(),
                                        options);
  require_close(acc, want, what + ": d_in accumulated");
}

const std::vector<ConvGeometry>& shapes() {
  static const std::vector<ConvGeometry> all = {
      geometry(2, 7, 5, 13, 11, 1, 1, 1, 0),  // 1x1 stride 1: a plain GEMM
      geometry(2, 9, 7, 6, 10, 1, 1, 2, 0),   // 1x1 stride 2: gathered rows
      geometry(2, 7, 9, 5, 7, 3, 3, 1, 1),    // 3x3 stride 1 pad 1
      geometry(3, 9, 8, 6, 5, 3, 3, 2, 1),    // 3x3 stride 2 pad 1, even input
      geometry(1, 15, 13, 3, 9, 7, 7, 2, 3),  // 7x7 stride 2 pad 3 (the ResNet stem), batch 1
      geometry(1, 5, 5, 1, 3, 3, 3, 1, 1),    // one input channel, batch 1
      geometry(2, 8, 6, 3, 4, 3, 1, 1, 1),    // non-square kernel
      geometry(2, 6, 7, 4, 5, 2, 2, 3, 0),    // stride larger than the kernel: pixels skipped
      geometry(1, 3, 3, 2, 3, 3, 3, 1, 2),    // padding wider than the overlap: all-zero patches
      geometry(3, 20, 20, 8, 6, 1, 1, 1, 0),  // 1x1, 1200 rows: several work units per thread
      geometry(2, 24, 23, 4, 5, 3, 3, 1, 1),  // 3x3, 1104 rows: several default tiles
  };
  return all;
}

// Shapes the direct kernels take (K % 16 == 0): full 14-pixel tiles and every kind of remainder,
// 16- and 32-channel output blocks, 1, 3 and 16+ input channels (the weight-gradient blocks of 16,
// 8, 4, 2, 1 channels), strides 1 and 2, pads 0 to 3, batches that split into bands of rows.
const std::vector<ConvGeometry>& direct_shapes() {
  static const std::vector<ConvGeometry> all = {
      geometry(2, 28, 28, 16, 16, 3, 3, 1, 1),  // resnet8's first stage: two full tiles per row
      geometry(3, 14, 14, 16, 32, 3, 3, 2, 1),  // its downsampling conv: stride 2, 7-pixel tiles
      geometry(1, 9, 17, 32, 48, 3, 3, 1, 1),   // 17 = 14 + 3 pixels; 48 = 32 + 16 channels
      geometry(2, 11, 10, 31, 16, 3, 3, 1, 0),  // C = 31: blocks of 16, 8, 4, 2, 1; no padding
      geometry(1, 15, 13, 3, 16, 7, 7, 2, 3),   // the ResNet stem: 7x7 stride 2 pad 3, C = 3
      geometry(4, 6, 6, 1, 16, 3, 3, 1, 1),     // one input channel (Fashion-MNIST's stem)
      geometry(2, 9, 9, 16, 64, 1, 1, 2, 0),    // 1x1 stride 2 shortcut
      geometry(2, 7, 7, 64, 64, 1, 1, 1, 0),    // 1x1 stride 1
      geometry(1, 5, 5, 16, 16, 5, 5, 1, 2),    // 5x5: data gradient with pad' = 2
      geometry(2, 8, 9, 16, 16, 3, 1, 1, 1),    // non-square, pad wider than the 1-wide kernel
      // Stride-2 data gradients by parity class: odd sizes, even kernels, wide pads, 1x1 (whose
      // odd rows and columns get no gradient at all).
      geometry(2, 15, 13, 32, 16, 3, 3, 2, 1),
      geometry(1, 12, 11, 16, 16, 2, 2, 2, 0),
      geometry(1, 13, 14, 16, 32, 5, 5, 2, 2),
      geometry(1, 17, 16, 16, 16, 7, 7, 2, 3),
  };
  return all;
}

}  // namespace

TEST_CASE("direct kernels and GEMM path match the naive reference when K is a multiple of 16",
          "[conv2d]") {
  const bool direct_here = nostrum::kernels::direct_conv_available();
#if defined(__x86_64__)
  REQUIRE(direct_here == (__builtin_cpu_supports("avx512f") &&
                          nostrum::testing::cap_allows(nostrum::Isa::kAvx512)));
  if (!direct_here)
    WARN("no AVX-512F on this CPU or under NOSTRUM_MAX_ISA: only the GEMM path is checked here");
#else
  REQUIRE_FALSE(direct_here);  // the direct kernels are AVX-512 code: the GEMM path runs here
#endif
  std::mt19937 rng(5);
  for (const ConvGeometry& g : direct_shapes()) {
    const auto [in, weight, d_out] = random_tensors(g, rng);
    const Reference ref(g, in, weight, d_out);
    // The GEMM path on the same shapes: what a CPU without AVX-512F runs.
    ConvOptions gemm;
    gemm.algorithm = ConvAlgorithm::kGemm;
    require_run_close(run_conv(g, in, weight, d_out, gemm), ref, name(g) + " gemm");
    if (!direct_here) continue;

    REQUIRE(nostrum::kernels::direct_conv_forward_fits(g));
    REQUIRE(nostrum::kernels::direct_conv_backward_weights_fits(g));
    const bool data_direct = g.C % 16 == 0;
    REQUIRE(nostrum::kernels::direct_conv_backward_data_fits(g) == data_direct);
    ConvOptions direct;
    direct.algorithm = ConvAlgorithm::kDirect;
    const Run run = run_conv(g, in, weight, d_out, direct);
    const std::string what = name(g) + " direct";
    require_run_close(run, ref, what);
    // Same bits on a second run (forward and d_in for any thread count: one thread sums each value
    // in a fixed order; d_weight for this thread count).
    const Run again = run_conv(g, in, weight, d_out, direct);
    REQUIRE(again.out == run.out);
    REQUIRE(again.d_in == run.d_in);
    REQUIRE(again.d_weight == run.d_weight);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(threads == 1 ? 2 : 1);  // another thread count
    const Run other = run_conv(g, in, weight, d_out, direct);
    omp_set_num_threads(threads);
    REQUIRE(other.out == run.out);
    if (data_direct) REQUIRE(other.d_in == run.d_in);
    require_accumulated_d_in(g, weight, d_out, ref, direct, rng, what);
  }
}

TEST_CASE("conv2d matches the naive reference in every threading mode and tile size", "[conv2d]") {
  std::mt19937 rng(42);
  for (const ConvGeometry& g : shapes()) {
    const auto [in, weight, d_out] = random_tensors(g, rng);
    const Reference ref(g, in, weight, d_out);
    const size_t row = size_t(g.C) * g.R * g.S;
    for (ConvThreading mode :
         {ConvThreading::kAuto, ConvThreading::kSharedGemm, ConvThreading::kPerThread}) {
      // Default budget (one tile), tiny budgets (many tiles crossing image borders; no room for
      // per-thread weight-gradient partials), and room for partials plus small tiles.
      const size_t partial = size_t(g.K) * row + 16;
      for (size_t budget : {size_t(0), 2 * row, 5 * row, 4 * partial + 6 * row}) {
        ConvOptions options;
        options.threading = mode;
        options.column_budget_floats = budget;
        const std::string what =
            name(g) + " mode " + std::to_string(int(mode)) + " budget " + std::to_string(budget);
        require_run_close(run_conv(g, in, weight, d_out, options), ref, what);
        require_accumulated_d_in(g, weight, d_out, ref, options, rng, what);
      }
    }
    // The stem passes d_in = nullptr: the weight gradient must not change.
    const Run no_d_in = run_conv(g, in, weight, d_out, ConvOptions{}, false);
    require_close(no_d_in.d_weight, ref.d_weight, name(g) + ": d_weight without d_in");
  }
}

TEST_CASE("conv2d gradients agree with central differences of the loss", "[conv2d]") {
  // loss = sum(out * G) evaluated in float64 from the fp32 forward. The conv is linear in the input
  // and in the weight, so central differences have no truncation error; only fp32 rounding of the
  // outputs the perturbed value touches remains (~1e-7 relative each), divided by 2*eps: about 1e-5
  // of the gradient scale observed, so 3e-4 leaves a wide margin while any real bug is O(1).
  std::mt19937 rng(7);
  const double eps = 1e-2;
  std::vector<ConvGeometry> all = shapes();
  all.insert(all.end(), direct_shapes().begin(), direct_shapes().end());  // the direct kernels too
  for (const ConvGeometry& g : all) {
    Tensors t = random_tensors(g, rng);  // named members: the lambdas below capture them
    std::vector<float>& in = t.in;
    std::vector<float>& weight = t.weight;
    const std::vector<float>& G = t.d_out;
    const Run run = run_conv(g, in, weight, G, ConvOptions{});
    std::vector<float> out(G.size()), scratch(nostrum::layers::conv2d_scratch_floats(g) + 1);
    auto loss = [&]() {
      nostrum::layers::conv2d_forward(out.data(), in.data(), weight.data(), g, scratch.data());
      double sum = 0.0;
      for (size_t i = 0; i < out.size(); ++i) sum += double(out[i]) * G[i];
      return sum;
    };
    auto check = [&](std::vector<float>& x, const std::vector<float>& grad, const char* what) {
      double rms = 0.0;
      for (float v : grad) rms += double(v) * v;
      rms = std::sqrt(rms / grad.size());
      std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
      for (int trial = 0; trial < 12; ++trial) {
        const size_t i = pick(rng);
        const float saved = x[i];
        x[i] = float(saved + eps);
        const double plus = loss();
        x[i] = float(saved - eps);
        const double minus = loss();
        x[i] = saved;
        const double step = double(float(saved + eps)) - double(float(saved - eps));
        const double fd = (plus - minus) / step;
        INFO(name(g) << " " << what << "[" << i << "]: analytic " << grad[i] << " central " << fd);
        REQUIRE(std::abs(fd - grad[i]) <= 3e-4 * (std::abs(grad[i]) + rms));
      }
    };
    check(in, run.d_in, "d_in");
    check(weight, run.d_weight, "d_weight");
  }
}

TEST_CASE("conv2d is bit-reproducible for a fixed thread count", "[conv2d]") {
  std::mt19937 rng(3);
  const ConvGeometry g = geometry(4, 12, 12, 16, 24, 3, 3, 1, 1);
  const auto [in, weight, d_out] = random_tensors(g, rng);
  const Run a = run_conv(g, in, weight, d_out, ConvOptions{});
  const Run b = run_conv(g, in, weight, d_out, ConvOptions{});
  REQUIRE(a.out == b.out);
  REQUIRE(a.d_in == b.d_in);
  REQUIRE(a.d_weight == b.d_weight);
}

TEST_CASE("conv2d rejects impossible geometry with a ShapeError", "[conv2d]") {
  REQUIRE_THROWS_AS(nostrum::layers::conv2d_scratch_floats(geometry(1, 2, 2, 3, 4, 5, 5, 1, 0)),
                    nostrum::ShapeError);
  REQUIRE_THROWS_AS(nostrum::layers::conv2d_scratch_floats(geometry(0, 8, 8, 3, 4, 3, 3, 1, 1)),
                    nostrum::ShapeError);
  REQUIRE_THROWS_AS(nostrum::layers::conv2d_scratch_floats(geometry(1, 8, 8, 3, 4, 3, 3, 0, 1)),
                    nostrum::ShapeError);
}
