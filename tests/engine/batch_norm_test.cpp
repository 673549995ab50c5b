// BatchNorm2d: forward/backward against a naive double reference, finite differences for input,
// gamma and beta, the fused ReLU against the unfused chain, determinism across thread counts, eval
// mode, and sync-BN statistics through a Reducer.
#include <omp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "grad_check.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/batch_norm.hpp"
#include "nostrum/layers/relu.hpp"

using namespace nostrum;
using namespace nostrum::layers;
using nostrum::testing::random_vector;

namespace {

struct Naive {
  std::vector<double> y, mean, var, dx, dgamma, dbeta;
};

// Naive two-pass BN in double; backward by the textbook formula.
Naive naive_bn(const std::vector<float>& x, const std::vector<float>& gamma,
               const std::vector<float>& beta, const std::vector<float>& dy, int64_t rows, int C,
               double eps) {
  Naive r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.mean.assign(C, 0);
  r.var.assign(C, 0);
  r.dgamma.assign(C, 0);
  r.dbeta.assign(C, 0);
  for (int c = 0; c < C; ++c) {
    for (int64_t i = 0; i < rows; ++i) r.mean[c] += x[i * C + c];
    r.mean[c] /= rows;
    for (int64_t i = 0; i < rows; ++i)
      r.var[c] += (x[i * C + c] - r.mean[c]) * (x[i * C + c] - r.mean[c]);
    r.var[c] /= rows;
    const double invstd = 1.0 / std::sqrt(r.var[c] + eps);
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const double xh = (x[i * C + c] - r.mean[c]) * invstd;
      r.y[i * C + c] = xh * gamma[c] + beta[c];
      sdy += dy[i * C + c];
      sdyx += dy[i * C + c] * xh;
    }
    r.dgamma[c] = sdyx;
    r.dbeta[c] = sdy;
    for (int64_t i = 0; i < rows; ++i) {
      const double xh = (x[i * C + c] - r.mean[c]) * invstd;
      r.dx[i * C + c] = gamma[c] * invstd * (dy[i * C + c] - sdy / rows - xh * sdyx / rows);
    }
  }
  return r;
}

// Pretends a second rank holds an identical batch: statistics are those of the batch twice.
class TwinReducer final : public Reducer {
 public:
  void sum(double* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] *= 2.0;
  }
  int group_size() const override { return 2; }
};

// values rounded to bf16 words, and those words widened back: a bf16 tensor and the fp32 one
// holding the same values.
struct Rounded {
  std::vector<uint16_t> words;
  std::vector<float> widened;
  explicit Rounded(const std::vector<float>& values)
      : words(values.size()), widened(values.size()) {
    for (size_t i = 0; i < values.size(); ++i) {
      words[i] = kernels::fp32_to_bf16(values[i]);
      widened[i] = kernels::bf16_to_fp32(words[i]);
    }
  }
};

struct Bn {
  int64_t rows;
  int C;
  std::vector<float> out, mean, invstd, rmean, rvar, gamma, beta, dx, dgamma, dbeta;
  std::vector<double> scratch;
  Bn(int64_t rows_, int C_, uint32_t seed) : rows(rows_), C(C_) {
    out.resize(rows * C);
    dx.resize(rows * C);
    mean.resize(C);
    invstd.resize(C);
    rmean.assign(C, 0.0f);
    rvar.assign(C, 1.0f);
    gamma = random_vector(C, seed + 1, 0.5f, 1.5f);
    beta = random_vector(C, seed + 2);
    dgamma.resize(C);
    dbeta.resize(C);
    scratch.resize(batch_norm_scratch_doubles(C));
  }
  void forward(const std::vector<float>& x, const BatchNormOptions& o) {
    batch_norm_forward_training(out.data(), mean.data(), invstd.data(), rmean.data(), rvar.data(),
                                x.data(), gamma.data(), beta.data(), rows, C, o, scratch.data());
  }
  void backward(const std::vector<float>& x, const std::vector<float>& dy,
                const BatchNormOptions& o) {
    batch_norm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(), out.data(),
                        gamma.data(), mean.data(), invstd.data(), rows, C, o, scratch.data());
  }
};

}  // namespace

TEST_CASE("batch norm matches a naive reference in training mode", "[engine][batch_norm]") {
  const std::vector<std::array<int, 4>> shapes = {
      {2, 3, 5, 7}, {1, 2, 3, 4},   {3, 1, 1, 16}, {4, 9, 7, 33},
      {1, 1, 2, 1}, {1, 3, 4, 4100}};  // more channels than one stack slice of the row sums (4096)
  uint32_t seed = 10;
  for (auto [N, H, W, C] : shapes) {
    const int64_t rows = int64_t(N) * H * W;
    INFO("shape " << N << "x" << H << "x" << W << "x" << C);
    // an offset far from zero makes E[x^2]-E[x]^2 in fp32 fail; the two-pass variance does not
    auto x = random_vector(rows * C, seed++, 99.0f, 101.0f);
    auto dy = random_vector(rows * C, seed++);
    Bn bn(rows, C, seed++);
    BatchNormOptions o;
    bn.forward(x, o);
    bn.backward(x, dy, o);
    Naive ref = naive_bn(x, bn.gamma, bn.beta, dy, rows, C, 1e-5);
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(bn.out[i] == Approx(ref.y[i]).margin(2e-4));
    for (size_t i = 0; i < x.size(); ++i)
      REQUIRE(bn.dx[i] == Approx(ref.dx[i]).margin(2e-3).epsilon(1e-3));
    for (int c = 0; c < C; ++c) {
      REQUIRE(bn.mean[c] == Approx(ref.mean[c]).epsilon(1e-6));
      REQUIRE(bn.dgamma[c] == Approx(ref.dgamma[c]).margin(1e-3).epsilon(1e-4));
      REQUIRE(bn.dbeta[c] == Approx(ref.dbeta[c]).margin(1e-4).epsilon(1e-5));
      // running statistics: momentum 0.1 from (0, 1), unbiased variance
      REQUIRE(bn.rmean[c] == Approx(0.1 * ref.mean[c]).epsilon(1e-6));
      REQUIRE(bn.rvar[c] == Approx(0.9 + 0.1 * ref.var[c] * rows / (rows - 1)).epsilon(1e-5));
    }
  }
}

TEST_CASE("batch norm gradients pass a finite-difference check", "[engine][batch_norm]") {
  for (bool relu : {false, true}) {
    const int64_t rows = 2 * 3 * 2;
    const int C = 3;
    auto x = random_vector(rows * C, 3);
    auto w = random_vector(rows * C, 4);
    Bn bn(rows, C, 5);
    BatchNormOptions o;
    o.fuse_relu = relu;
    bn.forward(x, o);
    bn.backward(x, w, o);
    auto loss = [&] {
      Bn b2 = bn;
      b2.forward(x, o);
      return nostrum::testing::weighted_sum(b2.out, w);
    };
    // kink-aware: skip inputs whose output sits within the step's reach of the ReLU kink
    std::vector<float> dx(bn.dx.begin(), bn.dx.end());
    CHECK(nostrum::testing::check_gradient("d_in", x, dx, loss, 1e-3f, 2e-2) > 0);
    std::vector<float> dgamma = bn.dgamma, dbeta = bn.dbeta;
    auto& gamma = bn.gamma;
    auto loss_g = [&] {
      Bn b2 = bn;
      b2.gamma = gamma;
      b2.forward(x, o);
      return nostrum::testing::weighted_sum(b2.out, w);
    };
    CHECK(nostrum::testing::check_gradient("d_gamma", gamma, dgamma, loss_g, 1e-3f, 2e-2) == C);
    auto& beta = bn.beta;
    auto loss_b = [&] {
      Bn b2 = bn;
      b2.beta = beta;
      b2.forward(x, o);
      return nostrum::testing::weighted_sum(b2.out, w);
    };
    CHECK(nostrum::testing::check_gradient("d_beta", beta, dbeta, loss_b, 1e-3f, 2e-2) == C);
  }
}

TEST_CASE("fused batch norm + ReLU equals the unfused chain bit for bit", "[engine][batch_norm]") {
  const int64_t rows = 5 * 7 * 3;
  const int C = 20;
  auto x = random_vector(rows * C, 7);
  auto dy = random_vector(rows * C, 8);
  Bn fused(rows, C, 9), plain(rows, C, 9);
  BatchNormOptions of, op;
  of.fuse_relu = true;
  fused.forward(x, of);
  plain.forward(x, op);
  std::vector<float> r(rows * C), dr(rows * C);
  relu_forward(r.data(), plain.out.data(), rows * C);
  CHECK(fused.out == r);
  fused.backward(x, dy, of);
  relu_backward(dr.data(), dy.data(), r.data(), rows * C);
  plain.backward(x, dr, op);
  CHECK(fused.dx == plain.dx);
  CHECK(fused.dgamma == plain.dgamma);
  CHECK(fused.dbeta == plain.dbeta);
}

TEST_CASE("batch norm is bit-identical for 1 and 2 threads", "[engine][batch_norm]") {
  const int64_t rows = 1000;
  const int C = 24;
  auto x = random_vector(rows * C, 11);
  auto dy = random_vector(rows * C, 12);
  Bn a(rows, C, 13), b(rows, C, 13);
  BatchNormOptions o;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  a.forward(x, o);
  a.backward(x, dy, o);
  omp_set_num_threads(2);
  b.forward(x, o);
  b.backward(x, dy, o);
  omp_set_num_threads(threads);
  CHECK(a.out == b.out);
  CHECK(a.dx == b.dx);
  CHECK(a.dgamma == b.dgamma);
  CHECK(a.rvar == b.rvar);
}

TEST_CASE("batch norm in eval mode uses the running statistics", "[engine][batch_norm]") {
  const int64_t rows = 6;
  const int C = 5;
  auto x = random_vector(rows * C, 14);
  auto rm = random_vector(C, 15);
  auto rv = random_vector(C, 16, 0.5f, 2.0f);
  Bn bn(rows, C, 17);
  std::vector<float> invstd(C);  // the call's scratch
  for (bool relu : {false, true}) {
    BatchNormOptions o;
    o.fuse_relu = relu;
    batch_norm_forward_inference(bn.out.data(), x.data(), bn.gamma.data(), bn.beta.data(),
                                 rm.data(), rv.data(), rows, C, o, invstd.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int c = 0; c < C; ++c) {
        double y = (x[i * C + c] - rm[c]) / std::sqrt(rv[c] + 1e-5) * bn.gamma[c] + bn.beta[c];
        if (relu) y = std::max(y, 0.0);
        REQUIRE(bn.out[i * C + c] == Approx(y).margin(1e-5));
      }
  }
}

TEST_CASE("sync batch norm sums statistics through the reducer", "[engine][batch_norm]") {
  // Two "ranks" with the same batch: same statistics as one rank, but the unbiased running variance
  // and the input gradient see the doubled count. Reference: naive BN over the batch twice.
  const int64_t rows = 6;
  const int C = 4;
  auto x = random_vector(rows * C, 18);
  auto dy = random_vector(rows * C, 19);
  Bn bn(rows, C, 20);
  TwinReducer twin;
  BatchNormOptions o;
  o.reducer = &twin;
  bn.forward(x, o);
  bn.backward(x, dy, o);
  std::vector<float> x2 = x, dy2 = dy, g = bn.gamma, b = bn.beta;
  x2.insert(x2.end(), x.begin(), x.end());
  dy2.insert(dy2.end(), dy.begin(), dy.end());
  Naive ref = naive_bn(x2, g, b, dy2, 2 * rows, C, 1e-5);
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(bn.out[i] == Approx(ref.y[i]).margin(1e-5));
    REQUIRE(bn.dx[i] == Approx(ref.dx[i]).margin(1e-5));
  }
  for (int c = 0; c < C; ++c) {
    REQUIRE(bn.rvar[c] == Approx(0.9 + 0.1 * ref.var[c] * 12 / 11).epsilon(1e-5));
    REQUIRE(bn.dgamma[c] == Approx(ref.dgamma[c] / 2).margin(1e-5));  // local share of the gradient
  }
}

TEST_CASE("batch norm rejects a single value per channel", "[engine][batch_norm]") {
  Bn bn(1, 3, 21);
  auto x = random_vector(3, 22);
  CHECK_THROWS_AS(bn.forward(x, BatchNormOptions{}), ShapeError);
}

TEST_CASE("batch norm backward writes its input gradient in bf16 as the fp32 one rounded",
          "[engine][batch_norm]") {
  // C = 3, 20, 300: vector tails; C = 5000: past the sums' 4096-channel slices; rows odd, split
  // over threads.
  for (int C : {20, 3, 300, 5000})
    for (bool relu : {false, true}) {
      const int64_t rows = C > 1000 ? 7 : 5 * 7 * 3;
      INFO("C " << C << " relu " << relu);
      auto x = random_vector(rows * C, 17);
      auto dy = random_vector(rows * C, 18);
      Bn bn(rows, C, 19);
      BatchNormOptions o;
      o.fuse_relu = relu;
      bn.forward(x, o);
      bn.backward(x, dy, o);
      const std::vector<float> dx = bn.dx, dgamma = bn.dgamma, dbeta = bn.dbeta;
      std::vector<uint16_t> words(rows * C, 0xFFFF);
      o.d_in_bf16 = words.data();
      std::fill(bn.dx.begin(), bn.dx.end(), -1.0f);
      bn.backward(x, dy, o);
      size_t differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += words[i] != kernels::fp32_to_bf16(dx[i]);
      CHECK(differ == 0);
      CHECK(std::all_of(bn.dx.begin(), bn.dx.end(), [](float v) { return v == -1.0f; }));
      CHECK(bn.dgamma == dgamma);
      CHECK(bn.dbeta == dbeta);
    }
}

TEST_CASE("batch norm writes its output in bf16 as the fp32 one rounded; backward's mask reads it",
          "[engine][batch_norm]") {
  // C = 300 over 3200 rows: 50 rows a chunk, so backward's statistics sum the bf16 output in
  // 16-row partials with a partial last one; C = 5000: past the sums' 4096-channel slices.
  for (int C : {20, 3, 300, 5000})
    for (bool relu : {false, true}) {
      const int64_t rows = C > 1000 ? 7 : C == 300 ? 3200 : 5 * 7 * 3;
      INFO("C " << C << " relu " << relu);
      // Large gradients that cancel: the backward sums' float partials show in the results, so
      // a tiling that regrouped them would too.
      auto x = random_vector(rows * C, 27);
      auto dy = random_vector(rows * C, 28, -1e4f, 1e4f);
      BatchNormOptions o;
      o.fuse_relu = relu;
      Bn bn(rows, C, 29), bf(rows, C, 29);
      bn.forward(x, o);
      bn.backward(x, dy, o);
      std::vector<uint16_t> y(rows * C, 0xFFFF);
      BatchNormOptions ob = o;
      ob.out_bf16 = y.data();
      std::fill(bf.out.begin(), bf.out.end(), -1.0f);
      bf.forward(x, ob);
      size_t differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += y[i] != kernels::fp32_to_bf16(bn.out[i]);
      CHECK(differ == 0);
      CHECK(std::all_of(bf.out.begin(), bf.out.end(), [](float v) { return v == -1.0f; }));
      CHECK(bf.mean == bn.mean);  // C floats
      CHECK(bf.invstd == bn.invstd);
      CHECK(bf.rvar == bn.rvar);
      // Backward reads the bf16 output (the fp32 one is -1 everywhere: a mask that read it would
      // drop every gradient): the same bits, with an fp32 and with a bf16 input gradient.
      // (Counts, not CHECK(a == b): a failure would print a million floats.)
      const auto mismatches = [](const std::vector<float>& a, const std::vector<float>& b) {
        size_t n = a.size() == b.size() ? 0 : 1;
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
        return n;
      };
      bf.backward(x, dy, ob);
      CHECK(mismatches(bf.dx, bn.dx) == 0);
      CHECK(mismatches(bf.dgamma, bn.dgamma) == 0);
      CHECK(mismatches(bf.dbeta, bn.dbeta) == 0);
      std::vector<uint16_t> words(rows * C, 0xFFFF);
      ob.d_in_bf16 = words.data();
      bf.backward(x, dy, ob);
      differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += words[i] != kernels::fp32_to_bf16(bn.dx[i]);
      CHECK(differ == 0);
      // Eval: the running statistics' normalisation, rounded likewise.
      std::vector<float> eval(rows * C), invstd(C);
      batch_norm_forward_inference(eval.data(), x.data(), bn.gamma.data(), bn.beta.data(),
                                   bn.rmean.data(), bn.rvar.data(), rows, C, o, invstd.data());
      BatchNormOptions oe = o;
      oe.out_bf16 = y.data();
      batch_norm_forward_inference(nullptr, x.data(), bn.gamma.data(), bn.beta.data(),
                                   bn.rmean.data(), bn.rvar.data(), rows, C, oe, invstd.data());
      differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += y[i] != kernels::fp32_to_bf16(eval[i]);
      CHECK(differ == 0);
    }
}

TEST_CASE("batch norm adds a bf16 residual as its widened fp32 values", "[engine][batch_norm]") {
  // The bf16 residual stream: a residual block's last batch norm reads its shortcut in bf16. The
  // same bits as the fp32 residual holding the widened values, written in fp32 or bf16, in
  // training and in eval; C = 5000 past the sums' 4096-channel slices, C = 300 over 3200 rows
  // several 50-row chunks per thread.
  for (int C : {20, 3, 300, 5000})
    for (bool relu : {false, true}) {
      const int64_t rows = C > 1000 ? 7 : C == 300 ? 3200 : 5 * 7 * 3;
      INFO("C " << C << " relu " << relu);
      const auto x = random_vector(rows * C, 31);
      const Rounded z(random_vector(rows * C, 32, -3.0f, 3.0f));
      BatchNormOptions o;
      o.fuse_relu = relu;
      o.residual = z.widened.data();
      Bn ref(rows, C, 33), bf(rows, C, 33), both(rows, C, 33);
      ref.forward(x, o);
      BatchNormOptions ob;
      ob.fuse_relu = relu;
      ob.residual_bf16 = z.words.data();
      bf.forward(x, ob);
      size_t differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += bf.out[i] != ref.out[i];
      CHECK(differ == 0);
      CHECK(bf.mean == ref.mean);
      CHECK(bf.rvar == ref.rvar);
      // bf16 in, bf16 out (a block output kept in bf16 for the next block).
      std::vector<uint16_t> y(rows * C, 0xFFFF);
      BatchNormOptions obb = ob;
      obb.out_bf16 = y.data();
      both.forward(x, obb);
      differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += y[i] != kernels::fp32_to_bf16(ref.out[i]);
      CHECK(differ == 0);
      // Eval, with the running statistics.
      std::vector<float> eval(rows * C), eval_bf(rows * C, -1.0f), invstd(C);
      batch_norm_forward_inference(eval.data(), x.data(), ref.gamma.data(), ref.beta.data(),
                                   ref.rmean.data(), ref.rvar.data(), rows, C, o, invstd.data());
      batch_norm_forward_inference(eval_bf.data(), x.data(), ref.gamma.data(), ref.beta.data(),
                                   ref.rmean.data(), ref.rvar.data(), rows, C, ob, invstd.data());
      differ = 0;
      for (int64_t i = 0; i < rows * C; ++i) differ += eval_bf[i] != eval[i];
      CHECK(differ == 0);
      // Both kinds of residual at once is a caller's error, named.
      BatchNormOptions bad = ob;
      bad.residual = z.widened.data();
      CHECK_THROWS_AS(both.forward(x, bad), ShapeError);
    }
}

TEST_CASE("batch norm reads a bf16 input as its widened fp32 values", "[engine][batch_norm]") {
  // A conv output kept in bf16: the statistics, the normalisation and the backward widen it as
  // they read it. The same bits as the fp32 input holding the widened values, alone and with the
  // bf16 output, gradient and residual, per rank and synced; C = 300 over 3200 rows puts several
  // 16-row partial sums in a statistics chunk and a partial last one.
  for (int C : {20, 3, 300, 5000})
    for (bool relu : {false, true})
      for (bool synced : {false, true}) {
        const int64_t rows = C > 1000 ? 7 : C == 300 ? 3200 : 5 * 7 * 3;
        INFO("C " << C << " relu " << relu << " synced " << synced);
        const Rounded x(random_vector(rows * C, 41, -2.0f, 3.0f));
        const auto dy = random_vector(rows * C, 42, -1e4f, 1e4f);
        TwinReducer twin;
        BatchNormOptions o;
        o.fuse_relu = relu;
        o.reducer = synced ? &twin : nullptr;
        Bn ref(rows, C, 43), bf(rows, C, 43);
        ref.forward(x.widened, o);
        ref.backward(x.widened, dy, o);
        BatchNormOptions ob = o;
        ob.in_bf16 = x.words.data();
        const std::vector<float> poisoned(rows * C, std::nanf(""));  // in must not be read
        bf.forward(poisoned, ob);
        const auto mismatches = [](const std::vector<float>& a, const std::vector<float>& b) {
          size_t n = a.size() == b.size() ? 0 : 1;
          for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
          return n;
        };
        CHECK(mismatches(bf.out, ref.out) == 0);
        CHECK(mismatches(bf.mean, ref.mean) == 0);
        CHECK(mismatches(bf.invstd, ref.invstd) == 0);
        CHECK(mismatches(bf.rvar, ref.rvar) == 0);
        bf.backward(poisoned, dy, ob);
        CHECK(mismatches(bf.dx, ref.dx) == 0);
        CHECK(mismatches(bf.dgamma, ref.dgamma) == 0);
        CHECK(mismatches(bf.dbeta, ref.dbeta) == 0);
        // With every other bf16 tensor too: output, input gradient, residual.
        const Rounded z(random_vector(rows * C, 44));
        std::vector<uint16_t> y(rows * C);
        BatchNormOptions oz = o;
        oz.residual = z.widened.data();
        Bn refz(rows, C, 45), all(rows, C, 45);
        refz.forward(x.widened, oz);
        BatchNormOptions oa = o;
        oa.in_bf16 = x.words.data();
        oa.residual_bf16 = z.words.data();
        oa.out_bf16 = y.data();
        all.forward(poisoned, oa);
        size_t differ = 0;
        for (int64_t i = 0; i < rows * C; ++i) differ += y[i] != kernels::fp32_to_bf16(refz.out[i]);
        CHECK(differ == 0);
        // Eval with the running statistics.
        std::vector<float> eval(rows * C), eval_bf(rows * C), invstd(C);
        batch_norm_forward_inference(eval.data(), x.widened.data(), ref.gamma.data(),
                                     ref.beta.data(), ref.rmean.data(), ref.rvar.data(), rows, C, o,
                                     invstd.data());
        batch_norm_forward_inference(eval_bf.data(), poisoned.data(), ref.gamma.data(),
                                     ref.beta.data(), ref.rmean.data(), ref.rvar.data(), rows, C,
                                     ob, invstd.data());
        CHECK(mismatches(eval_bf, eval) == 0);
      }
}
