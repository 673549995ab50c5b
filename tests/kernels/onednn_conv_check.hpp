// The oneDNN convolution passes (kernels/onednn_conv.hpp) against a naive float64 reference:
// outputs NaN-filled, outputs and workspace followed by guard zones that must come back untouched,
// forward, backward-data (overwrite and accumulate) and backward-weights, each within its
// precision's bound.
#pragma once

#include <omp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "model_convs.hpp"
#include "nostrum/kernels/conv_candidate.hpp"
#include "nostrum/kernels/onednn_conv.hpp"
#include "nostrum/layers/batch_norm.hpp"

namespace onednn_check {

using nostrum::kernels::ConvGeometry;
using nostrum::kernels::ConvPass;
using nostrum::kernels::OnednnConv;
using nostrum::kernels::Precision;

// ResNet-50's convolutions at 64x64 (every channel count, kernel, stride and padding of the 224
// network; fewer pixels keep the float64 reference fast) and resnet8's at 28x28x1, batch 2,
// each distinct geometry once.
inline std::vector<ConvGeometry> model_shapes() {
  std::vector<ConvGeometry> all;
  std::set<std::tuple<int, int, int, int, int, int, int>> seen;
  auto add = [&](const std::vector<nostrum::bench::NamedConv>& convs) {
    for (const auto& c : convs) {
      const ConvGeometry& g = c.geometry;
      if (seen.insert({g.H, g.W, g.C, g.K, g.R, g.stride, g.pad}).second) all.push_back(g);
    }
  };
  add(nostrum::bench::resnet50_convs(64, 2));
  add(nostrum::bench::cifar_resnet_convs(28, 1, 16, 1, 2));
  return all;
}

inline ConvGeometry geometry(int N, int H, int W, int C, int K, int R, int S, int stride, int pad) {
  ConvGeometry g;
  g.N = N, g.H = H, g.W = W, g.C = C, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}

inline std::string name(const ConvGeometry& g) {
  return "N" + std::to_string(g.N) + " " + std::to_string(g.H) + "x" + std::to_string(g.W) + " C" +
         std::to_string(g.C) + " K" + std::to_string(g.K) + " " + std::to_string(g.R) + "x" +
         std::to_string(g.S) + "/" + std::to_string(g.stride) + " pad " + std::to_string(g.pad);
}

// The error bound of one output that sums `terms` products of absolute sum S. fp32: the classic
// gamma_n bound, n * 2^-24 * S in any summation order, plus 4 units of slack (conv2d_test.cpp's).
// bf16: each operand rounded to bf16 is off by at most 2^-8 relative, each product by 2 * 2^-8 +
// 2^-16, and the fp32 sum adds (terms + 2) * 2^-24 * S (bf16_conv_test.cpp's).
inline double bound(Precision p, double S, long terms) {
  const double u24 = std::ldexp(1.0, -24);
  if (p == Precision::kFp32) return double(terms + 4) * u24 * S + 1e-30;
  return (2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + double(terms + 2) * u24) * S + 1e-30;
}

struct Tensors {
  std::vector<float> in, weight, d_out, d_in_base;  // d_in_base: what accumulate_d_in adds onto
};

inline std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline Tensors random_tensors(const ConvGeometry& g, std::mt19937& rng) {
  Tensors t;
  t.in = random_vector(size_t(g.N) * g.H * g.W * g.C, rng);
  t.weight = random_vector(size_t(g.K) * g.C * g.R * g.S, rng);
  t.d_out = random_vector(size_t(g.N) * g.P() * g.Q() * g.K, rng);
  t.d_in_base = random_vector(t.in.size(), rng);
  return t;
}

// Exact values and the absolute sums of their terms, one visit per (n,p,q,k,c,r,s).
struct Reference {
  std::vector<double> out, out_abs, d_in, d_in_abs, d_weight, d_weight_abs;
  long out_terms, d_in_terms, d_weight_terms;
  Reference(const ConvGeometry& g, const Tensors& t)
      : out(t.d_out.size()),
        out_abs(t.d_out.size()),
        d_in(t.in.size()),
        d_in_abs(t.in.size()),
        d_weight(t.weight.size()),
        d_weight_abs(t.weight.size()) {
    const int P = g.P(), Q = g.Q();
    for (int n = 0; n < g.N; ++n)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q)
          for (int r = 0; r < g.R; ++r)
            for (int s = 0; s < g.S; ++s) {
              const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              const size_t i0 = ((size_t(n) * g.H + h) * g.W + w) * g.C;
              const size_t o0 = ((size_t(n) * P + p) * Q + q) * g.K;
              for (int k = 0; k < g.K; ++k) {
                const double dy = t.d_out[o0 + k];
                double sum = 0, abs_sum = 0;
                for (int c = 0; c < g.C; ++c) {
                  const size_t j = ((size_t(k) * g.C + c) * g.R + r) * g.S + s;
                  const double x = t.in[i0 + c], wt = t.weight[j];
                  sum += x * wt, abs_sum += std::abs(x * wt);
                  d_in[i0 + c] += dy * wt, d_in_abs[i0 + c] += std::abs(dy * wt);
                  d_weight[j] += dy * x, d_weight_abs[j] += std::abs(dy * x);
                }
                out[o0 + k] += sum, out_abs[o0 + k] += abs_sum;
              }
            }
    out_terms = long(g.C) * g.R * g.S;
    d_in_terms = long(g.K) * g.R * g.S;
    d_weight_terms = long(g.N) * P * Q;
  }
};

constexpr size_t kGuard = 64;
constexpr float kGuardValue = 12345.0f;

// A result buffer of n floats, all NaN (so "overwritten" is checked), followed by a guard zone.
inline std::vector<float> nan_filled(size_t n) {
  std::vector<float> v(n + kGuard, kGuardValue);
  std::fill(v.begin(), v.begin() + long(n), std::numeric_limits<float>::quiet_NaN());
  return v;
}

// got[0, n) within the bound of the reference (base added where accumulating), guard untouched;
// returns the worst error / bound.
inline double require_close(const std::vector<float>& got, const std::vector<double>& value,
                            const std::vector<double>& abs_sum, long terms, Precision p,
                            const std::vector<float>* base, const std::string& what) {
  const size_t n = value.size();
  REQUIRE(got.size() == n + kGuard);
  for (size_t i = n; i < got.size(); ++i) {
    INFO(what << ": guard float " << i - n << " after the output overwritten");
    REQUIRE(got[i] == kGuardValue);
  }
  size_t worst = 0;
  double worst_ratio = 0.0;
  const double u24 = std::ldexp(1.0, -24);
  for (size_t i = 0; i < n; ++i) {
    const double b = base ? double((*base)[i]) : 0.0;
    const double tol = bound(p, abs_sum[i], terms) + 2 * u24 * std::abs(b);
    const double err = std::abs(double(got[i]) - (value[i] + b));
    const double ratio =
        std::isfinite(got[i]) ? err / tol : std::numeric_limits<double>::infinity();
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  INFO(what << ": worst element " << worst << " got " << got[worst] << " want "
            << value[worst] + (base ? (*base)[worst] : 0.0) << " (error / bound " << worst_ratio
            << ")");
  REQUIRE(worst_ratio <= 1.0);
  return worst_ratio;
}

// A pass's workspace: workspace_bytes() of 0xff bytes (NaN as floats: nothing may be read before it
// is written) followed by a guard zone.
struct Workspace {
  std::vector<unsigned char> bytes;
  size_t size;
  explicit Workspace(const OnednnConv& conv) : Workspace(conv.workspace_bytes()) {}
  explicit Workspace(size_t workspace_bytes) : size(workspace_bytes) {
    bytes.assign(size + 64 + kGuard, 0xff);
    std::fill(bytes.begin() + long(size) + 64, bytes.end(), 0x5a);
  }
  void* data() { return bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64; }
  void require_guard(const std::string& what) {
    const unsigned char* end = static_cast<unsigned char*>(data()) + size;
    for (const unsigned char* p = end; p < end + kGuard; ++p) {
      INFO(what << ": workspace written " << p - end << " bytes past workspace_bytes()");
      REQUIRE(*p == (p >= bytes.data() + size + 64 ? 0x5a : 0xff));
    }
  }
};

// All three passes (and backward-data accumulating) of g at precision p with `threads` threads,
// each object created at that thread count; returns the worst error / bound seen.
inline double check_passes(const ConvGeometry& g, const Tensors& t, const Reference& ref,
                           Precision p, int threads) {
  omp_set_num_threads(threads);
  const std::string what =
      name(g) + " " + nostrum::kernels::precision_name(p) + " threads " + std::to_string(threads);
  double worst = 0.0;
  {
    OnednnConv conv(g, ConvPass::kForward, p);
    INFO(what << " forward: " << conv.implementation());
    Workspace ws(conv);
    auto out = nan_filled(t.d_out.size());
    conv.forward(out.data(), t.in.data(), t.weight.data(), ws.data());
    ws.require_guard(what + " forward");
    worst = std::max(worst, require_close(out, ref.out, ref.out_abs, ref.out_terms, p, nullptr,
                                          what + " forward"));
  }
  {
    OnednnConv conv(g, ConvPass::kBackwardData, p);
    INFO(what << " backward-data: " << conv.implementation());
    Workspace ws(conv);
    for (bool accumulate : {false, true}) {  // one object: accumulate is per call
      auto d_in = nan_filled(t.in.size());
      if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), d_in.begin());
      conv.backward_data(d_in.data(), t.d_out.data(), t.weight.data(), accumulate, ws.data());
      ws.require_guard(what + " backward-data");
      worst = std::max(worst, require_close(d_in, ref.d_in, ref.d_in_abs, ref.d_in_terms, p,
                                            accumulate ? &t.d_in_base : nullptr,
                                            what + (accumulate ? " d_in +=" : " d_in")));
    }
  }
  {
    OnednnConv conv(g, ConvPass::kBackwardWeights, p);
    INFO(what << " backward-weights: " << conv.implementation());
    Workspace ws(conv);
    auto d_weight = nan_filled(t.weight.size());
    conv.backward_weights(d_weight.data(), t.d_out.data(), t.in.data(), ws.data());
    ws.require_guard(what + " backward-weights");
    worst = std::max(worst, require_close(d_weight, ref.d_weight, ref.d_weight_abs,
                                          ref.d_weight_terms, p, nullptr, what + " d_weight"));
  }
  return worst;
}

// Through the candidate interface (kernels/conv_candidate.hpp): every pass prepared at batch 3, run
// at 3, at a partial batch of 1 and at 3 again, the shared scratch guarded.
inline void check_candidate(const nostrum::kernels::ConvCandidate& candidate, Precision p) {
  using nostrum::kernels::ConvCall;
  using nostrum::kernels::ConvPass;
  REQUIRE(candidate.supports(p));
  const ConvGeometry g = geometry(3, 10, 9, 20, 24, 3, 3, 1, 1);
  for (ConvPass pass : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights}) {
    REQUIRE(candidate.fits(g, pass));
    auto prepared = candidate.prepare(g, pass, p);
    Workspace scratch(prepared->scratch_floats() * sizeof(float));
    for (int N : {3, 1, 3}) {
      ConvGeometry gn = g;
      gn.N = N;
      std::mt19937 rng(uint32_t(5 + N));
      const Tensors t = random_tensors(gn, rng);
      const Reference ref(gn, t);
      const std::string what = std::string(candidate.name()) + " " +
                               (pass == ConvPass::kForward        ? "forward"
                                : pass == ConvPass::kBackwardData ? "backward-data"
                                                                  : "backward-weights") +
                               " at N " + std::to_string(N);
      ConvCall call;
      call.N = N;
      call.scratch = static_cast<float*>(scratch.data());
      auto result = nan_filled(pass == ConvPass::kForward        ? t.d_out.size()
                               : pass == ConvPass::kBackwardData ? t.in.size()
                                                                 : t.weight.size());
      switch (pass) {
        case ConvPass::kForward:
          call.in = t.in.data(), call.weight = t.weight.data(), call.out = result.data();
          break;
        case ConvPass::kBackwardData:
          call.d_out = t.d_out.data(), call.weight = t.weight.data(), call.d_in = result.data();
          break;
        case ConvPass::kBackwardWeights:
          call.d_out = t.d_out.data(), call.in = t.in.data(), call.d_weight = result.data();
          break;
      }
      prepared->run(call);
      scratch.require_guard(what);
      if (pass == ConvPass::kForward)
        require_close(result, ref.out, ref.out_abs, ref.out_terms, p, nullptr, what);
      else if (pass == ConvPass::kBackwardData)
        require_close(result, ref.d_in, ref.d_in_abs, ref.d_in_terms, p, nullptr, what);
      else
        require_close(result, ref.d_weight, ref.d_weight_abs, ref.d_weight_terms, p, nullptr, what);
    }
  }
}

// Backward-data accumulating in chunks of images (the batch's gradient over the 16 MiB sum
// buffer): chunks of 3 of 6 images (1x1), of 1 of 17 (3x3 stride 2, 17 prime); overwriting too.
inline void check_accumulate_in_chunks(Precision p) {
  for (const ConvGeometry& g :
       {geometry(6, 64, 64, 256, 3, 1, 1, 1, 0), geometry(17, 64, 64, 64, 2, 3, 3, 2, 1)}) {
    std::mt19937 rng(uint32_t(g.N));
    const Tensors t = random_tensors(g, rng);
    const Reference ref(g, t);
    OnednnConv conv(g, ConvPass::kBackwardData, p);
    Workspace ws(conv);
    INFO(name(g) << " workspace " << conv.workspace_bytes() << " bytes");
    CHECK(conv.workspace_bytes() < size_t(g.N) * g.H * g.W * g.C * sizeof(float));  // chunked
    for (bool accumulate : {true, false}) {
      auto d_in = nan_filled(t.in.size());
      if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), d_in.begin());
      conv.backward_data(d_in.data(), t.d_out.data(), t.weight.data(), accumulate, ws.data());
      ws.require_guard(name(g));
      require_close(d_in, ref.d_in, ref.d_in_abs, ref.d_in_terms, p,
                    accumulate ? &t.d_in_base : nullptr,
                    name(g) + (accumulate ? " d_in +=" : " d_in"));
    }
  }
}

// How many elements of a and b differ in their bits (a count, not the vectors, in a failure).
template <typename T>
size_t differing_elements(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

// A block's add + ReLU backward on d_in's rows (its mask, two norms' inputs and means, their sums)
// behind a finisher that records the calls a kernel makes.
struct RecordedAddBackward final : nostrum::kernels::DInFinisher {
  struct Call {
    int64_t r0, r1;
    bool add;
  };
  RecordedAddBackward(int64_t rows, int C, std::mt19937& rng)
      : rows_(rows), C_(C), y(random_vector(size_t(rows) * C, rng)) {
    for (int i = 0; i < 2; ++i) {
      x[i] = random_vector(y.size(), rng);
      mean[i] = random_vector(size_t(C), rng);
      sums[i].assign(nostrum::layers::batch_norm_backward_sums_doubles(C), -1.0);
      requests[i].in = x[i].data();
      requests[i].save_mean = mean[i].data();
      requests[i].sums = sums[i].data();
    }
  }
  // The finisher over d_in; calls then go through it.
  void start(float* d_in) { inner.emplace(d_in, y.data(), nullptr, rows_, C_, requests, 2); }
  void finish(const float* add, int64_t r0, int64_t r1) override {
    calls.push_back({r0, r1, add != nullptr});
    inner->finish(add, r0, r1);
  }
  int64_t rows() const override { return rows_; }
  // The same backward on d_in in one call after the pass, into other sums.
  std::vector<std::vector<double>> after(float* d_in) {
    std::vector<std::vector<double>> other(2, std::vector<double>(sums[0].size(), -2.0));
    nostrum::layers::NormSumsRequest r[2] = {requests[0], requests[1]};
    r[0].sums = other[0].data(), r[1].sums = other[1].data();
    nostrum::layers::add_relu_backward_with_norm_sums(d_in, y.data(), nullptr, rows_, C_, r, 2);
    return other;
  }
  // The calls cover [0, rows) in order, `count` of them, with a partial exactly when `added`.
  void require_calls(size_t count, bool added, const std::string& what) const {
    INFO(what);
    REQUIRE(calls.size() == count);
    int64_t at = 0;
    for (const Call& c : calls) {
      CHECK(c.r0 == at);
      CHECK(c.add == added);
      at = c.r1;
    }
    CHECK(at == rows_);
  }
  // The calls are chunks of whole images (image_rows rows each), more than one, all alike.
  void require_image_chunks(int64_t image_rows, const std::string& what) const {
    INFO(what);
    REQUIRE(calls.size() > 1);
    const int64_t chunk = calls.front().r1 - calls.front().r0;
    CHECK(chunk % image_rows == 0);
    for (const Call& c : calls) CHECK(c.r1 - c.r0 == chunk);
  }

  int64_t rows_;
  int C_;
  std::vector<float> y, x[2], mean[2];
  std::vector<double> sums[2];
  nostrum::layers::NormSumsRequest requests[2];
  std::optional<nostrum::layers::AddReluBackward> inner;
  std::vector<Call> calls;
};

// Backward-data handing its rows to a finisher (a block's add + ReLU backward) as they become
// final: with accumulate each image chunk's partial is added by the finisher (one call per chunk),
// without it one call after the pass; either way the bits of the pass followed by the finisher over
// every row, d_in and the norms' sums alike.
inline void check_finisher_in_chunks(Precision p) {
  for (const ConvGeometry& g :
       {geometry(6, 64, 64, 256, 3, 1, 1, 1, 0), geometry(17, 64, 64, 64, 2, 3, 3, 2, 1)}) {
    std::mt19937 rng(uint32_t(g.N) + 7);
    const Tensors t = random_tensors(g, rng);
    OnednnConv conv(g, ConvPass::kBackwardData, p);
    Workspace ws(conv);
    const int64_t rows = int64_t(g.N) * g.H * g.W;
    for (bool accumulate : {true, false}) {
      const std::string what = name(g) + (accumulate ? " d_in +=" : " d_in");
      RecordedAddBackward add_backward(rows, g.C, rng);
      auto fused = nan_filled(t.in.size()), after = nan_filled(t.in.size());
      for (auto* d_in : {&fused, &after})
        if (accumulate) std::copy(t.d_in_base.begin(), t.d_in_base.end(), d_in->begin());
      add_backward.start(fused.data());
      conv.backward_data(fused.data(), t.d_out.data(), t.weight.data(), accumulate, ws.data(),
                         nullptr, &add_backward);
      conv.backward_data(after.data(), t.d_out.data(), t.weight.data(), accumulate, ws.data());
      ws.require_guard(what);
      const auto after_sums = add_backward.after(after.data());
      // Accumulating: one call per image chunk with its partial (the batch is too large for one);
      // overwriting: one call after the pass.
      add_backward.require_calls(accumulate ? add_backward.calls.size() : 1, accumulate, what);
      if (accumulate) add_backward.require_image_chunks(int64_t(g.H) * g.W, what);
      INFO(what);
      CHECK(differing_elements(fused, after) == 0);
      CHECK(differing_elements(add_backward.sums[0], after_sums[0]) == 0);
      CHECK(differing_elements(add_backward.sums[1], after_sums[1]) == 0);
    }
  }
}

// Odd shapes: every kind of remainder and padding (the tests' shapes of conv2d_test.cpp and
// bf16_conv_test.cpp).
inline std::vector<ConvGeometry> odd_shapes() {
  return {
      geometry(2, 7, 5, 13, 11, 1, 1, 1, 0),   // 1x1 stride 1
      geometry(2, 9, 7, 6, 10, 1, 1, 2, 0),    // 1x1 stride 2
      geometry(2, 7, 9, 5, 7, 3, 3, 1, 1),     // 3x3 stride 1 pad 1
      geometry(3, 9, 8, 6, 5, 3, 3, 2, 1),     // 3x3 stride 2, even input
      geometry(1, 15, 13, 3, 9, 7, 7, 2, 3),   // 7x7 stride 2 pad 3, batch 1
      geometry(1, 5, 5, 1, 3, 3, 3, 1, 1),     // one input channel
      geometry(2, 8, 6, 3, 4, 3, 1, 1, 1),     // non-square kernel
      geometry(2, 6, 7, 4, 5, 2, 2, 3, 0),     // stride larger than the kernel: pixels skipped
      geometry(1, 3, 3, 2, 3, 3, 3, 1, 2),     // padding wider than the overlap
      geometry(2, 9, 7, 19, 33, 3, 3, 2, 1),   // odd channels, stride 2
      geometry(2, 4, 4, 130, 36, 3, 3, 1, 1),  // long reduction (1170)
  };
}

}  // namespace onednn_check
