// resnet8 and resnet50 in bf16 against nostrum fp32 and against PyTorch 1.13's bf16 autocast, run
// live (/usr/bin/python3, tests/engine/torch_bf16_reference.py): same weights and batch, one
// training step; logits, loss and every parameter gradient. Relative error of a tensor:
// ||x - ref||_2 / ||ref||_2, the reference being fp32 (PyTorch's fp32 = nostrum's fp32 to 1e-4,
// torch_compare_test.cpp).
//
// Bounds. One bf16 operand rounding is <= 2^-8 relative, so a single bf16 layer is off by about
// 2^-8 * (a random-walk factor <= 1); through a ResNet's depth the errors add up but BN
// renormalises each stage. No closed form holds for the whole network, so the bound is relative to
// the peer: nostrum bf16's error against fp32 must be at most 1.5x PyTorch autocast's error against
// the same fp32 (PyTorch additionally keeps activations in bf16 between layers, so it should be the
// larger one), and each is asserted to be bf16-sized (> 2^-12: the bf16 path really ran) and below
// 2^-3 for logits and loss (a broken kernel gives O(1)). Gradients: the worst parameter tensor.
// Loss: nostrum's bf16 loss within a Taylor bound (loss_difference_bound) of PyTorch's bf16 loss
// at the two sets of bf16 logits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "h5_read.hpp"
#include "io/weights_file.hpp"
#include "model_compare.hpp"
#include "nostrum/model/model.hpp"

using namespace nostrum;
using nostrum::testing::read_dataset;
using nostrum::testing::temp_path;

namespace {

using Case = nostrum::testing::ModelCase;
using nostrum::testing::relative_error;

struct Step {
  std::vector<float> logits;
  double loss = 0;
  std::vector<std::vector<float>> grads;  // trainable parameters, in table order
  std::vector<std::string> names;
  int fp32_passes = 0;  // conv/classifier passes on an fp32 kernel (a bf16 run may measure them in)
  int block_outputs = 0;  // residual blocks whose output is kept in bf16 (the bf16 residual stream)
  int conv_outputs = 0;   // convs whose output is kept in bf16 for the batch norm after them
};

// One training step of a model with these weights in `precision`.
Step nostrum_step(const Case& c, const std::string& weights, kernels::Precision precision,
                  const std::vector<float>& images, const std::vector<int32_t>& labels,
                  const std::string& conv_kernels = "fixed") {
  model::ModelConfig config;
  config.name = c.name;
  config.num_classes = c.classes;
  config.in_channels = c.channels;
  config.precision = precision;
  auto m = model::Model::create(config);
  m->build(c.batch, c.size, c.size);
  nostrum::testing::use_conv_kernels(*m, conv_kernels);
  io::load_weights(weights, m->parameters());
  Step s;
  for (const kernels::ConvChoice& row : m->conv_kernels().rows)
    s.fp32_passes += !kernels::find_conv_candidate(row.chosen)->supports(kernels::Precision::kBf16);
  s.block_outputs = m->bf16_block_outputs();
  s.conv_outputs = m->bf16_conv_outputs();
  const float* logits = m->forward(images.data(), c.batch, true);
  s.logits.assign(logits, logits + size_t(c.batch) * c.classes);
  s.loss = m->loss(labels.data(), 0.1f, 1.0f / c.batch);
  m->backward();
  for (const auto& p : m->parameters())
    if (p.trainable()) {
      s.grads.emplace_back(p.grad, p.grad + p.numel());
      s.names.push_back(p.name);
    }
  return s;
}

// An upper bound on |L(a) - L(b)|, L the mean over N rows of cross-entropy with label smoothing s
// over C classes (targets t_j = (1 - s) [j = label] + s / C, summing to 1), for logits a and b
// (N x C). Per row, l(z) = -sum_j t_j log softmax_j(z) has gradient softmax(z) - t and Hessian
// diag(p) - p p^T, whose eigenvalues lie in [0, 1/2]; Taylor's theorem at b with d = a - b:
// |l(a) - l(b)| <= |(softmax(b) - t) . d| + |d|^2 / 4. Exact to first order, so a loss computed
// wrongly (targets, smoothing, reduction, other logits) exceeds it, where |dloss| <= 2 max|dz|
// (the first-order term bounded by the L1 norm 2 of softmax - t) allows any error up to that.
double loss_difference_bound(const std::vector<float>& a, const std::vector<float>& b,
                             const std::vector<int32_t>& labels, int classes, double smoothing) {
  const size_t rows = labels.size();
  double bound = 0.0;
  for (size_t i = 0; i < rows; ++i) {
    const float* bi = b.data() + i * size_t(classes);
    const float* ai = a.data() + i * size_t(classes);
    const double top = *std::max_element(bi, bi + classes);
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(double(bi[j]) - top);
    double first = 0.0, second = 0.0;
    for (int j = 0; j < classes; ++j) {
      const double p = std::exp(double(bi[j]) - top) / sum;
      const double t = (1.0 - smoothing) * (j == labels[i]) + smoothing / classes;
      const double d = double(ai[j]) - double(bi[j]);
      first += (p - t) * d;
      second += d * d;
    }
    bound += std::abs(first) + second / 4.0;
  }
  return bound / double(rows);
}

// Worst gradient relative error of a against the reference grads in ref.h5 under `group`.
double worst_grad(const Step& a, const std::string& ref, const std::string& group,
                  std::string& where) {
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    const auto expect = read_dataset<float>(ref, group + "/grad/" + a.names[i]);
    REQUIRE(expect.size() == a.grads[i].size());
    const double e = relative_error(a.grads[i].data(), expect.data(), expect.size());
    if (e > worst) worst = e, where = a.names[i];
  }
  return worst;
}

// The modes whose every pass must run a bf16 kernel: all but the measured choice.
bool precision_must_show(const std::string& mode) {
  return mode != "measure";
}

void compare(const Case& c) {
  // Weights: the model's init with BN parameters as torch_compare_test.cpp sets them (small last
  // gammas keep a batch-2 deep ResNet's gradients well-conditioned).
  {
    model::ModelConfig config;
    config.name = c.name;
    config.num_classes = c.classes;
    config.in_channels = c.channels;
    auto m = model::Model::create(config);
    m->build(c.batch, c.size, c.size);
    m->init(5);
    nostrum::testing::set_test_bn_parameters(*m, /*running_means=*/false);
    io::save_weights(temp_path(std::string(c.name) + "_bf16_weights.h5"), m->parameters(), c.name);
  }
  const std::string weights = temp_path(std::string(c.name) + "_bf16_weights.h5");
  const std::string ref = temp_path(std::string(c.name) + "_bf16_reference.h5");
  nostrum::testing::run_torch_reference(
      "--model " + std::string(c.name) + " --classes " + std::to_string(c.classes) +
          " --in-channels " + std::to_string(c.channels) + " --batch " + std::to_string(c.batch) +
          " --size " + std::to_string(c.size) + " --weights " + weights + " --out " + ref,
      "torch_bf16_reference.py");
  const auto images = read_dataset<float>(ref, "images");
  const auto labels = read_dataset<int32_t>(ref, "labels");
  const Step fp32 = nostrum_step(c, weights, kernels::Precision::kFp32, images, labels);
  // nostrum bf16 under every conv kernel choice that runs bf16 here (the fixed rule, measured,
  // each candidate forced), each against the same references.
  for (const std::string& mode : nostrum::testing::conv_kernel_modes(kernels::Precision::kBf16)) {
    INFO("--conv-kernel " << mode);
    const Step bf16 = nostrum_step(c, weights, kernels::Precision::kBf16, images, labels, mode);
    const auto torch_fp32_logits = read_dataset<float>(ref, "fp32/logits");
    const auto torch_bf16_logits = read_dataset<float>(ref, "bf16/logits");
    const double torch_fp32_loss = read_dataset<double>(ref, "fp32/loss")[0];
    const double torch_bf16_loss = read_dataset<double>(ref, "bf16/loss")[0];
    const size_t n = fp32.logits.size();

    const double ours_logits = relative_error(bf16.logits.data(), fp32.logits.data(), n);
    const double ours_vs_torch32 = relative_error(bf16.logits.data(), torch_fp32_logits.data(), n);
    const double torch_logits =
        relative_error(torch_bf16_logits.data(), torch_fp32_logits.data(), n);
    const double ours_vs_torch16 = relative_error(bf16.logits.data(), torch_bf16_logits.data(), n);
    const double ours_loss = std::abs(bf16.loss - fp32.loss) / fp32.loss;
    const double torch_loss = std::abs(torch_bf16_loss - torch_fp32_loss) / torch_fp32_loss;
    std::string w_ours, w_ours32, w_torch;
    const double ours_grad32 = worst_grad(bf16, ref, "fp32", w_ours32);  // vs PyTorch fp32
    const double ours_grad_torch16 = worst_grad(bf16, ref, "bf16", w_ours);
    // PyTorch bf16 against PyTorch fp32: read both and compare.
    double torch_grad = 0;
    for (const auto& name : bf16.names) {
      const auto a = read_dataset<float>(ref, "bf16/grad/" + name);
      const auto b = read_dataset<float>(ref, "fp32/grad/" + name);
      const double e = relative_error(a.data(), b.data(), a.size());
      if (e > torch_grad) torch_grad = e, w_torch = name;
    }
    WARN(c.name << " (" << bf16.fp32_passes << " passes on fp32 kernels, " << bf16.block_outputs
                << " block outputs and " << bf16.conv_outputs << " conv outputs in bf16)"
                << " bf16 relative errors against fp32: logits nostrum " << ours_logits
                << " (vs PyTorch fp32 " << ours_vs_torch32 << ") PyTorch autocast " << torch_logits
                << "; loss nostrum " << ours_loss << " PyTorch " << torch_loss
                << "; worst gradient nostrum " << ours_grad32 << " (" << w_ours32 << ") PyTorch "
                << torch_grad << " (" << w_torch << "); nostrum bf16 vs PyTorch bf16: logits "
                << ours_vs_torch16 << ", worst gradient " << ours_grad_torch16 << " (" << w_ours
                << ")");
    const double bf16_visible = std::ldexp(1.0, -12), broken = std::ldexp(1.0, -3);
    // bf16 must show where every pass ran a bf16 kernel; the measured choice may take fp32
    // kernels for some or all passes (where they are faster), which only lowers the error.
    INFO(bf16.fp32_passes << " passes on fp32 kernels");
    const bool all_bf16 = bf16.fp32_passes == 0;
    if (precision_must_show(mode)) CHECK(all_bf16);
    if (all_bf16) CHECK(ours_logits > bf16_visible);
    if (all_bf16) CHECK(bf16.block_outputs > 0);  // the bf16 residual stream is what is compared
    CHECK(ours_logits < broken);
    CHECK(ours_vs_torch32 <= 1.5 * torch_logits);
    // The loss against the logits: cross-entropy with (smoothed) targets summing to 1 has a
    // gradient softmax - target of L1 norm <= 2 in the logits, so |loss(bf16) - loss(fp32)| <= 2
    // max |dz|.
    double max_logit_change = 0.0;
    for (size_t i = 0; i < n; ++i)
      max_logit_change =
          std::max(max_logit_change, std::abs(double(bf16.logits[i]) - double(fp32.logits[i])));
    CHECK(std::abs(bf16.loss - fp32.loss) <= 2.0 * max_logit_change);
    // nostrum's bf16 loss against PyTorch's bf16 loss, both from their own bf16 logits (both fp32
    // cross-entropy with smoothing 0.1): within the Taylor bound for these two sets of logits, plus
    // the two fp32 loss evaluations' rounding (a few ulp of the log-sum-exp terms, far below 1e-5
    // of the loss plus the largest logit).
    double largest_logit = 0.0;
    for (float z : torch_bf16_logits) largest_logit = std::max(largest_logit, double(std::abs(z)));
    const double loss_bound =
        loss_difference_bound(bf16.logits, torch_bf16_logits, labels, c.classes, 0.1) +
        1e-5 * (1.0 + std::abs(torch_bf16_loss) + largest_logit);
    INFO("nostrum bf16 loss " << bf16.loss << ", PyTorch bf16 loss " << torch_bf16_loss
                              << ", bound " << loss_bound);
    CHECK(std::abs(bf16.loss - torch_bf16_loss) <= loss_bound);
    if (all_bf16) CHECK(ours_grad32 > bf16_visible);  // the gradients did go through bf16
    CHECK(ours_grad32 <= 1.5 * torch_grad);
    CHECK(torch_logits < broken);
  }
}

}  // namespace

TEST_CASE("resnet8 bf16 against fp32 and PyTorch bf16 autocast", "[bf16][torch]") {
  compare({"resnet8", 10, 1, 4, 28});
}

TEST_CASE("resnet50 bf16 against fp32 and PyTorch bf16 autocast", "[bf16][torch]") {
  compare({"resnet50", 11, 3, 2, 64});
}
