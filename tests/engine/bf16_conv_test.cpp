// conv2d and linear with precision bf16 against float64 references on odd shapes (NHWC
// activations, (K, C, R, S) weights): forward, data gradient, weight gradient, every threading
// mode, accumulate_d_in; the bound per output is the one of bf16_test.cpp with the pass's
// reduction length.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/conv2d.hpp"
#include "nostrum/layers/linear.hpp"

using nostrum::kernels::Precision;
using nostrum::layers::ConvGeometry;
using nostrum::layers::ConvOptions;
using nostrum::layers::ConvThreading;

namespace {

// For a sum of `terms` products with absolute sum S, against float64 on the fp32 operands: each
// bf16 operand is off by at most u = 2^-8 relative (half an ulp of an 8-bit significand), each
// product by 2u + u^2, and fp32 accumulation in any order adds at most (terms - 1) * 2^-24 * S
// (first order): |err| <= (2 * 2^-8 + 2^-16 + (terms + 2) * 2^-24) * S.
double bound(double S, int64_t terms) {
  return (2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) +
          double(terms + 2) * std::ldexp(1.0, -24)) *
         S;
}

struct Worst {
  double ratio = 0;  // largest err / bound
  void see(double err, double b, const std::string& what) {
    ratio = std::max(ratio, err / b);
    if (!(err <= b)) FAIL(what << ": err " << err << " > bound " << b);
  }
};

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// in (N,H,W,C), weight (K,C,R,S), d_out (N,P,Q,K): checks the three bf16 passes for one mode.
void check_conv(const ConvGeometry& g, ConvOptions options, Worst& worst) {
  options.precision = Precision::kBf16;
  std::mt19937 rng(uint32_t(g.C * 131 + g.K * 7 + g.R));
  const int P = g.P(), Q = g.Q();
  auto in = random_vector(size_t(g.N) * g.H * g.W * g.C, rng);
  auto weight = random_vector(size_t(g.K) * g.C * g.R * g.S, rng);
  auto d_out = random_vector(size_t(g.N) * P * Q * g.K, rng);
  auto d_in0 = random_vector(in.size(), rng);  // what accumulate_d_in adds onto
  std::vector<float> scratch(nostrum::layers::conv2d_scratch_floats(g, options));
  std::vector<float> out(d_out.size()), d_weight(weight.size()), d_in = d_in0;
  nostrum::layers::conv2d_forward(out.data(), in.data(), weight.data(), g, scratch.data(), options);
  nostrum::layers::conv2d_backward_weights(d_weight.data(), d_out.data(), in.data(), g,
                                           scratch.data(), options);
  nostrum::layers::conv2d_backward_data(d_in.data(), d_out.data(), weight.data(), g, scratch.data(),
                                        options);
  auto X = [&](int n, int h, int w, int c) {
    return double(in[((size_t(n) * g.H + h) * g.W + w) * g.C + c]);
  };
  auto Wt = [&](int k, int c, int r, int s) {
    return double(weight[((size_t(k) * g.C + c) * g.R + r) * g.S + s]);
  };
  auto DO = [&](int n, int p, int q, int k) {
    return double(d_out[((size_t(n) * P + p) * Q + q) * g.K + k]);
  };
  std::vector<double> ref_dw(weight.size(), 0), abs_dw(weight.size(), 0);
  std::vector<double> ref_di(in.size(), 0), abs_di(in.size(), 0);
  const std::string name = "conv C" + std::to_string(g.C) + " K" + std::to_string(g.K) + " " +
                           std::to_string(g.R) + "x" + std::to_string(g.S) + "/" +
                           std::to_string(g.stride) + " pad " + std::to_string(g.pad);
  for (int n = 0; n < g.N; ++n)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < Q; ++q)
        for (int k = 0; k < g.K; ++k) {
          double sum = 0, S = 0;
          for (int r = 0; r < g.R; ++r)
            for (int s = 0; s < g.S; ++s) {
              const int h = p * g.stride + r - g.pad, w = q * g.stride + s - g.pad;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              for (int c = 0; c < g.C; ++c) {
                const double x = X(n, h, w, c), wt = Wt(k, c, r, s), d = DO(n, p, q, k);
                sum += x * wt, S += std::fabs(x * wt);
                const size_t wi = ((size_t(k) * g.C + c) * g.R + r) * g.S + s;
                ref_dw[wi] += d * x, abs_dw[wi] += std::fabs(d * x);
                const size_t ii = ((size_t(n) * g.H + h) * g.W + w) * g.C + c;
                ref_di[ii] += d * wt, abs_di[ii] += std::fabs(d * wt);
              }
            }
          const double got = out[((size_t(n) * P + p) * Q + q) * g.K + k];
          worst.see(std::fabs(got - sum), bound(S, int64_t(g.C) * g.R * g.S) + 1e-30,
                    name + " fwd");
        }
  for (size_t i = 0; i < weight.size(); ++i)
    worst.see(std::fabs(d_weight[i] - ref_dw[i]), bound(abs_dw[i], int64_t(g.N) * P * Q) + 1e-30,
              name + " bwd-w");
  const double u24 = std::ldexp(1.0, -24);
  for (size_t i = 0; i < in.size(); ++i) {
    const double base = options.accumulate_d_in ? double(d_in0[i]) : 0.0;
    worst.see(std::fabs(d_in[i] - (ref_di[i] + base)),
              bound(abs_di[i], int64_t(g.K) * g.R * g.S) + 2 * u24 * std::fabs(base) + 1e-30,
              name + " bwd-d");
  }
}

ConvGeometry geometry(int N, int H, int W, int C, int K, int R, int S, int stride, int pad) {
  ConvGeometry g;
  g.N = N, g.H = H, g.W = W, g.C = C, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}

}  // namespace

TEST_CASE("conv2d bf16: forward and both gradients within the bf16 bound, odd shapes", "[bf16]") {
  Worst worst;
  const ConvGeometry shapes[] = {
      geometry(2, 7, 9, 3, 17, 3, 3, 1, 1),    // stem-like, C = 3
      geometry(3, 6, 5, 16, 16, 3, 3, 1, 1),   // resnet8 first stage (direct in fp32)
      geometry(2, 9, 7, 19, 33, 3, 3, 2, 1),   // odd channels, stride 2
      geometry(2, 5, 6, 40, 24, 1, 1, 1, 0),   // 1x1: the activations are the columns
      geometry(2, 8, 8, 21, 30, 1, 1, 2, 0),   // 1x1 stride 2 (im2col)
      geometry(1, 11, 10, 1, 5, 7, 7, 2, 3),   // one input channel: no weight packing
      geometry(2, 4, 4, 130, 36, 3, 3, 1, 1),  // long reduction (1170): several k-blocks
      // resnet8's channel counts (16, 32, 64; 28x28 input shrunk to keep the reference cheap) and
      // ResNet-50's stem and bottleneck widths: 16-column (narrow) strips, 32-column strips,
      // more than one 168-row block, several 192-pair blocks.
      geometry(2, 8, 8, 1, 16, 3, 3, 1, 1),      // resnet8 stem
      geometry(2, 8, 8, 16, 32, 3, 3, 2, 1),     // resnet8 layer2.0.conv1
      geometry(2, 8, 8, 16, 32, 1, 1, 2, 0),     // resnet8 layer2.0 shortcut
      geometry(2, 4, 4, 32, 64, 3, 3, 2, 1),     // resnet8 layer3.0.conv1
      geometry(1, 12, 12, 3, 64, 7, 7, 2, 3),    // ResNet-50 stem (147-long rows)
      geometry(1, 14, 14, 64, 256, 1, 1, 1, 0),  // bottleneck expand: 196 rows, 8 strips
      geometry(1, 7, 7, 256, 64, 3, 3, 1, 1),    // 2304-long rows: 12 pair blocks
  };
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const auto& g : shapes)
      for (ConvThreading t : {ConvThreading::kSharedGemm, ConvThreading::kPerThread})
        for (bool accumulate : {false, true}) {
          ConvOptions o;
          o.threading = t;
          o.accumulate_d_in = accumulate;
          if (t == ConvThreading::kPerThread) o.column_budget_floats = 4096;  // many small tiles
          check_conv(g, o, worst);
        }
  }
  INFO("worst err/bound " << worst.ratio);
  CHECK(worst.ratio <= 1.0);
  CHECK(worst.ratio > 0.01);  // bf16 rounding is visible: not an fp32 path in disguise
}

TEST_CASE("linear bf16: forward and gradients within the bf16 bound", "[bf16]") {
  const int N = 13, C = 67, K = 10;
  std::mt19937 rng(3);
  auto in = random_vector(size_t(N) * C, rng), weight = random_vector(size_t(K) * C, rng);
  auto bias = random_vector(K, rng), d_out = random_vector(size_t(N) * K, rng);
  std::vector<float> out(size_t(N) * K), d_in(size_t(N) * C), d_weight(weight.size()), d_bias(K);
  nostrum::layers::linear_forward(out.data(), in.data(), weight.data(), bias.data(), N, C, K,
                                  Precision::kBf16);
  nostrum::layers::linear_backward(d_in.data(), d_weight.data(), d_bias.data(), d_out.data(),
                                   in.data(), weight.data(), N, C, K, Precision::kBf16);
  Worst worst;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      double sum = bias[k], S = std::fabs(bias[k]);
      for (int c = 0; c < C; ++c) {
        sum += double(in[n * C + c]) * weight[k * C + c];
        S += std::fabs(double(in[n * C + c]) * weight[k * C + c]);
      }
      worst.see(std::fabs(out[n * K + k] - sum), bound(S, C + 1), "linear fwd");
    }
  for (int k = 0; k < K; ++k) {
    double db = 0, Sb = 0;
    for (int n = 0; n < N; ++n) db += d_out[n * K + k], Sb += std::fabs(d_out[n * K + k]);
    CHECK(std::fabs(d_bias[k] - db) <= (N + 2) * std::ldexp(1.0, -24) * Sb);  // bias sum: fp32
    for (int c = 0; c < C; ++c) {
      double s = 0, S = 0;
      for (int n = 0; n < N; ++n) {
        s += double(d_out[n * K + k]) * in[n * C + c];
        S += std::fabs(double(d_out[n * K + k]) * in[n * C + c]);
      }
      worst.see(std::fabs(d_weight[k * C + c] - s), bound(S, N), "linear d_weight");
    }
  }
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) {
      double s = 0, S = 0;
      for (int k = 0; k < K; ++k) {
        s += double(d_out[n * K + k]) * weight[k * C + c];
        S += std::fabs(double(d_out[n * K + k]) * weight[k * C + c]);
      }
      worst.see(std::fabs(d_in[n * C + c] - s), bound(S, K), "linear d_in");
    }
  CHECK(worst.ratio > 0.01);
}
