// Shared by the conv candidate tests (fp32 and bf16): a float64 reference of the three passes, the
// conv geometries of resnet8 and ResNet-50 (from the model itself) and odd ones, and the check of
// one registry candidate against the reference: exactly its scratch_floats() of scratch followed
// by a guard that must come back untouched, outputs starting as NaN ("overwritten" checked),
// backward-data also accumulating onto a random d_in, every element within a bound; a backward
// pass that takes a bf16 output gradient or bf16 input gives with it the bits it gives on the fp32
// one.
#pragma once

#include <omp.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "nostrum/model/model.hpp"
#include "winograd_bound.hpp"

namespace nostrum::testing {

using kernels::ConvGeometry;
using kernels::ConvPass;

inline ConvGeometry conv_geometry(int N, int H, int W, int C, int K, int R, int S, int stride,
                                  int pad) {
  ConvGeometry g;
  g.N = N, g.H = H, g.W = W, g.C = C, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}

// The distinct conv geometries of a model at batch n and a square input.
inline std::vector<ConvGeometry> model_conv_geometries(const char* name, int classes, int channels,
                                                       int n, int size) {
  model::ModelConfig config;
  config.name = name;
  config.num_classes = classes;
  config.in_channels = channels;
  auto m = model::Model::create(config);
  m->build(n, size, size);
  std::vector<ConvGeometry> out;
  for (const kernels::ConvPassShape& s : m->conv_pass_shapes()) {
    bool seen = false;
    for (const ConvGeometry& g : out) seen = seen || kernels::same_shape({g, s.pass}, s);
    if (!seen) out.push_back(s.g);
  }
  return out;
}

// Odd shapes: channels not multiples of 16, odd spatial sizes, 1x1 with stride, a 7x7 on one
// channel, strides the direct kernels take on non-square inputs, and a 2x2 window at stride 3 that
// reads no input pixel of rows and columns 1, 4 and 7 (their data gradient is zero); and 3x3
// stride-1 shapes that the Winograd candidate takes (a pass's input channels a multiple of 32, its
// output channels of 16) with odd sizes (part-filled tiles), an output strip of 16, and more input
// channels than one 384-channel block holds.
inline std::vector<ConvGeometry> odd_conv_geometries() {
  return {conv_geometry(2, 7, 9, 3, 17, 3, 3, 1, 1),  conv_geometry(2, 9, 7, 19, 33, 3, 3, 2, 1),
          conv_geometry(2, 5, 6, 40, 24, 1, 1, 1, 0), conv_geometry(2, 8, 8, 21, 30, 1, 1, 2, 0),
          conv_geometry(1, 11, 10, 1, 5, 7, 7, 2, 3), conv_geometry(2, 6, 5, 16, 32, 3, 3, 2, 1),
          conv_geometry(1, 5, 7, 48, 16, 1, 1, 2, 0), conv_geometry(3, 6, 5, 16, 16, 3, 3, 1, 1),
          conv_geometry(2, 8, 8, 18, 20, 2, 2, 3, 1), conv_geometry(2, 7, 5, 32, 48, 3, 3, 1, 1),
          conv_geometry(1, 5, 3, 16, 32, 3, 3, 1, 1), conv_geometry(1, 3, 4, 32, 416, 3, 3, 1, 1),
          conv_geometry(1, 3, 3, 416, 16, 3, 3, 1, 1)};
}

// A pass's exact values and the absolute sums of their terms, float64.
struct ExactTensor {
  std::vector<double> value, abs_sum;
  int64_t terms = 0;
};

struct ConvCase {
  ConvGeometry g;
  std::vector<float> in, weight, d_out, d_in0;  // d_in0: what accumulate_d_in adds onto
  ExactTensor out, d_in, d_weight;

  explicit ConvCase(const ConvGeometry& geometry) : g(geometry) {
    std::mt19937 rng(uint32_t(g.C * 131 + g.K * 7 + g.R * 3 + g.H));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int P = g.P(), Q = g.Q();
    const auto fill = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      for (float& x : v) x = u(rng);
    };
    fill(in, size_t(g.N) * g.H * g.W * g.C);
    fill(weight, size_t(g.K) * g.C * g.R * g.S);
    fill(d_out, size_t(g.N) * P * Q * g.K);
    fill(d_in0, in.size());
    out.value.assign(d_out.size(), 0), out.abs_sum.assign(d_out.size(), 0);
    d_in.value.assign(in.size(), 0), d_in.abs_sum.assign(in.size(), 0);
    d_weight.value.assign(weight.size(), 0), d_weight.abs_sum.assign(weight.size(), 0);
    for (int n = 0; n < g.N; ++n)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q)
          for (int r = 0; r < g.R; ++r) {
            const int h = p * g.stride - g.pad + r;
            if (h < 0 || h >= g.H) continue;
            for (int s = 0; s < g.S; ++s) {
              const int w = q * g.stride - g.pad + s;
              if (w < 0 || w >= g.W) continue;
              const size_t o0 = ((size_t(n) * P + p) * Q + q) * g.K;
              const size_t i0 = ((size_t(n) * g.H + h) * g.W + w) * g.C;
              for (int k = 0; k < g.K; ++k) {
                const double dy = d_out[o0 + k];
                double sum = 0, abs = 0;
                for (int c = 0; c < g.C; ++c) {
                  const size_t j = ((size_t(k) * g.C + c) * g.R + r) * g.S + s;
                  const double x = in[i0 + c], wt = weight[j];
                  sum += x * wt, abs += std::abs(x * wt);
                  d_in.value[i0 + c] += dy * wt, d_in.abs_sum[i0 + c] += std::abs(dy * wt);
                  d_weight.value[j] += dy * x, d_weight.abs_sum[j] += std::abs(dy * x);
                }
                out.value[o0 + k] += sum, out.abs_sum[o0 + k] += abs;
              }
            }
          }
    out.terms = int64_t(g.C) * g.R * g.S;
    d_in.terms = int64_t(g.K) * g.R * g.S;
    d_weight.terms = int64_t(g.N) * P * Q;
  }
};

// The bound on |got - exact| for a sum of `terms` products of absolute sum S.
// fp32: the classic gamma_n bound of fp32 summation in any order, plus a few ulps of slack.
inline double fp32_bound(double S, int64_t terms) {
  return double(terms + 4) * std::ldexp(1.0, -24) * S;
}
// bf16 operands (each within 2^-8 relative), fp32 sums: the bound of tests/engine/bf16_conv_test.
inline double bf16_bound(double S, int64_t terms) {
  return (2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) +
          double(terms + 2) * std::ldexp(1.0, -24)) *
         S;
}
using Bound = double (*)(double, int64_t);

// Largest error / bound over the elements (fails the test at the first element over its bound).
inline double check_close(const std::vector<float>& got, const ExactTensor& ref, Bound bound,
                          const std::vector<float>* base, const std::string& what) {
  REQUIRE(got.size() == ref.value.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double b0 = base ? double((*base)[i]) : 0.0;
    const double tol =
        bound(ref.abs_sum[i], ref.terms) + 2 * std::ldexp(1.0, -24) * std::abs(b0) + 1e-30;
    const double err = std::abs(double(got[i]) - (ref.value[i] + b0));
    const double ratio =
        std::isfinite(got[i]) ? err / tol : std::numeric_limits<double>::infinity();
    if (!(ratio <= 1.0)) {
      INFO(what << ": element " << i << " got " << got[i] << " want " << ref.value[i] + b0
                << " (error / bound " << ratio << ")");
      REQUIRE(ratio <= 1.0);
    }
    worst = std::max(worst, ratio);
  }
  return worst;
}

// One candidate on every pass it is eligible for, at `threads` threads; returns the passes run and
// raises *worst to the largest error / bound seen.
inline int check_candidate(const kernels::ConvCandidate& c, const ConvCase& cc,
                           kernels::Precision precision, int threads, Bound bound, double* worst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr size_t kGuard = 64;
  constexpr float kSentinel = 12345.0f;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  int passes = 0;
  for (ConvPass pass : kernels::kConvPasses) {
    if (!kernels::conv_candidate_eligible(c, cc.g, pass, precision)) continue;
    const std::string what = std::string(c.name()) + " " + kernels::conv_pass_name(pass) + " " +
                             kernels::conv_shape_name(cc.g) + " threads " + std::to_string(threads);
    auto kernel = c.prepare(cc.g, pass, precision);
    std::optional<ExactTensor> winograd;  // a Winograd candidate's bound (see below)
    if (c.rounding() == kernels::ConvRounding::kWinogradTransforms) {
      winograd = pass == ConvPass::kForward        ? cc.out
                 : pass == ConvPass::kBackwardData ? cc.d_in
                                                   : cc.d_weight;
      winograd->abs_sum = winograd_magnitudes(cc.g, pass, cc.in, cc.weight, cc.d_out);
      winograd->terms += 16;  // the transforms' sums
    }
    const size_t scratch_floats = kernel->scratch_floats();
    // 64-byte aligned scratch of exactly scratch_floats, then the guard.
    std::vector<float> storage(scratch_floats + kGuard + 16, kSentinel);
    float* scratch = storage.data();
    while (reinterpret_cast<uintptr_t>(scratch) % 64) ++scratch;
    kernels::ConvCall call;
    call.N = cc.g.N;
    call.scratch = scratch;
    for (bool accumulate : {false, true}) {
      if (accumulate && pass != ConvPass::kBackwardData) continue;
      std::vector<float> result;
      switch (pass) {
        case ConvPass::kForward:
          result.assign(cc.d_out.size(), nan);
          call.in = cc.in.data(), call.weight = cc.weight.data(), call.out = result.data();
          break;
        case ConvPass::kBackwardData:
          result = accumulate ? cc.d_in0 : std::vector<float>(cc.in.size(), nan);
          call.d_out = cc.d_out.data(), call.weight = cc.weight.data(), call.d_in = result.data();
          call.accumulate_d_in = accumulate;
          break;
        case ConvPass::kBackwardWeights:
          result.assign(cc.weight.size(), nan);
          call.in = cc.in.data(), call.d_out = cc.d_out.data(), call.d_weight = result.data();
          break;
      }
      kernel->run(call);
      for (size_t i = 0; i < kGuard; ++i)
        if (scratch[scratch_floats + i] != kSentinel) {
          INFO(what << ": wrote past its scratch_floats() (" << scratch_floats << ")");
          REQUIRE(scratch[scratch_floats + i] == kSentinel);
        }
      const ExactTensor& exact = pass == ConvPass::kForward        ? cc.out
                                 : pass == ConvPass::kBackwardData ? cc.d_in
                                                                   : cc.d_weight;
      // A Winograd candidate rounds the transformed operands, not the operands: its bound takes
      // the magnitudes of what it rounds (winograd_bound.hpp); the value is the same.
      const ExactTensor& ref = winograd ? *winograd : exact;
      *worst = std::max(*worst, check_close(result, ref, bound, accumulate ? &cc.d_in0 : nullptr,
                                            what + (accumulate ? " accumulate" : "")));
      if (kernel->takes_bf16_in()) {
        // The input handed over in bf16: the same bits as rounding it in the pass.
        REQUIRE(pass != ConvPass::kBackwardData);
        std::vector<uint16_t> in_bf16(cc.in.size());
        kernels::convert_to_bf16(in_bf16.data(), cc.in.data(), int64_t(cc.in.size()));
        std::vector<float> from_bf16(result.size(), nan);
        kernels::ConvCall bf16_call = call;
        bf16_call.in = nullptr;
        bf16_call.in_bf16 = in_bf16.data();
        (pass == ConvPass::kForward ? bf16_call.out : bf16_call.d_weight) = from_bf16.data();
        kernel->run(bf16_call);
        INFO(what << ": bf16 input");
        REQUIRE(from_bf16 == result);
      }
      if (kernel->writes_bf16_out()) {
        // The output kept in bf16: the fp32 output rounded to nearest even.
        REQUIRE(pass == ConvPass::kForward);
        std::vector<uint16_t> words(result.size(), 0xFFFF);
        kernels::ConvCall bf16_call = call;
        bf16_call.out = nullptr;
        bf16_call.out_bf16 = words.data();
        kernel->run(bf16_call);
        size_t differ = 0;
        for (size_t i = 0; i < words.size(); ++i)
          differ += words[i] != kernels::fp32_to_bf16(result[i]);
        INFO(what << ": bf16 output");
        REQUIRE(differ == 0);
      }
      if (kernel->takes_bf16_d_out()) {
        // The output gradient handed over in bf16: the same bits as rounding it in the pass.
        REQUIRE(pass != ConvPass::kForward);
        std::vector<uint16_t> d_out_bf16(cc.d_out.size());
        kernels::convert_to_bf16(d_out_bf16.data(), cc.d_out.data(), int64_t(cc.d_out.size()));
        std::vector<float> from_bf16 = pass == ConvPass::kBackwardData && accumulate
                                           ? cc.d_in0
                                           : std::vector<float>(result.size(), nan);
        kernels::ConvCall bf16_call = call;
        bf16_call.d_out = nullptr;
        bf16_call.d_out_bf16 = d_out_bf16.data();
        (pass == ConvPass::kBackwardData ? bf16_call.d_in : bf16_call.d_weight) = from_bf16.data();
        kernel->run(bf16_call);
        INFO(what << (accumulate ? " accumulate" : "") << ": bf16 output gradient");
        REQUIRE(from_bf16 == result);
      }
    }
    ++passes;
  }
  omp_set_num_threads(saved_threads);
  return passes;
}

// A candidate's weight gradient of cc's operands at the pool's thread count, from fp32 operands or,
// given them, from bf16 ones handed over (in_bf16 and d_out_bf16 together).
inline std::vector<float> weight_gradient_of(const kernels::ConvCandidate& c, const ConvCase& cc,
                                             kernels::Precision precision,
                                             const uint16_t* in_bf16 = nullptr,
                                             const uint16_t* d_out_bf16 = nullptr) {
  auto kernel = c.prepare(cc.g, ConvPass::kBackwardWeights, precision);
  Arena scratch(kernel->scratch_floats() + 1, "test scratch");
  std::vector<float> result(cc.weight.size(), std::numeric_limits<float>::quiet_NaN());
  kernels::ConvCall call;
  call.N = cc.g.N, call.d_weight = result.data(), call.scratch = scratch.data();
  if (in_bf16)
    call.in_bf16 = in_bf16, call.d_out_bf16 = d_out_bf16;
  else
    call.in = cc.in.data(), call.d_out = cc.d_out.data();
  kernel->run(call);
  return result;
}

// Two registry candidates' weight gradients bit for bit on each geometry, at 2 and 3 threads (the
// rows split unevenly): from fp32 operands, and in kBf16 also from bf16 ones handed over. Both must
// fit every geometry; `name` must be available here (the caller checks).
inline void check_same_weight_gradients(const char* name, const char* reference,
                                        kernels::Precision precision,
                                        const std::vector<ConvGeometry>& geometries) {
  const kernels::ConvCandidate* c = kernels::find_conv_candidate(name);
  const kernels::ConvCandidate* ref = kernels::find_conv_candidate(reference);
  REQUIRE(c != nullptr);
  REQUIRE(ref != nullptr);
  const int saved_threads = omp_get_max_threads();
  for (const ConvGeometry& g : geometries)
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      INFO(name << " against " << reference << ": " << kernels::conv_shape_name(g) << " threads "
                << threads);
      REQUIRE(c->fits(g, ConvPass::kBackwardWeights));
      REQUIRE(ref->fits(g, ConvPass::kBackwardWeights));
      const ConvCase cc(g);
      CHECK(weight_gradient_of(*c, cc, precision) == weight_gradient_of(*ref, cc, precision));
      if (precision != kernels::Precision::kBf16) continue;
      std::vector<uint16_t> in_bf16(cc.in.size()), d_out_bf16(cc.d_out.size());
      kernels::convert_to_bf16(in_bf16.data(), cc.in.data(), int64_t(cc.in.size()));
      kernels::convert_to_bf16(d_out_bf16.data(), cc.d_out.data(), int64_t(cc.d_out.size()));
      INFO("operands handed over in bf16");
      CHECK(weight_gradient_of(*c, cc, precision, in_bf16.data(), d_out_bf16.data()) ==
            weight_gradient_of(*ref, cc, precision, in_bf16.data(), d_out_bf16.data()));
    }
  omp_set_num_threads(saved_threads);
}

// Every registry candidate that runs here in `precision` on every geometry, threads 1 and 2: each
// pass of each geometry is run by at least one candidate, and every such candidate runs somewhere,
// but those named in `fit_none` (no geometry of the set is theirs; the caller says why), which
// must then run nowhere: a candidate exempted wrongly fails too.
inline void check_all_candidates(const std::vector<ConvGeometry>& geometries,
                                 kernels::Precision precision, Bound bound, double* worst,
                                 const std::set<std::string>& fit_none = {}) {
  std::map<std::string, int> runs;
  for (const ConvGeometry& g : geometries) {
    const ConvCase cc(g);
    for (ConvPass pass : kernels::kConvPasses) {
      bool any = false;
      for (const kernels::ConvCandidate* c : kernels::conv_candidates())
        any = any || kernels::conv_candidate_eligible(*c, g, pass, precision);
      INFO(kernels::conv_shape_name(g) << " " << kernels::conv_pass_name(pass));
      REQUIRE(any);
    }
    for (const kernels::ConvCandidate* c : kernels::conv_candidates())
      for (int threads : {1, 2})
        runs[c->name()] += check_candidate(*c, cc, precision, threads, bound, worst);
  }
  for (const kernels::ConvCandidate* c : kernels::conv_candidates()) {
    if (!c->available(cpu_features()) || !c->supports(precision)) continue;
    if (fit_none.count(c->name())) {
      INFO("candidate " << c->name() << " was to fit none of these geometries");
      CHECK(runs[c->name()] == 0);
    } else {
      INFO("candidate " << c->name() << " ran no pass");
      CHECK(runs[c->name()] > 0);
    }
  }
}

}  // namespace nostrum::testing
