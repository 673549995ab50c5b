// Data parallelism end to end at the step level: P ranks, each with B/P samples of a global batch
// B, gradients summed by the bucketed GradientAllreducer, give the same weights after k SGD steps
// as one process with the whole batch B (to fp32 rounding), for a model without BN and for a ResNet
// with sync-BN; and every rank holds bit-identical weights. Runs under 1, 2, 3 and 4 ranks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "mpi/communicator.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/mpi_reducer.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/layers/cross_entropy.hpp"
#include "nostrum/layers/linear.hpp"
#include "nostrum/layers/relu.hpp"
#include "nostrum/model/model.hpp"
#include "nostrum/optim/sgd.hpp"

using nostrum::mpi::Communicator;

namespace {

constexpr int kGlobalBatch = 12;  // divisible by 1, 2, 3 and 4

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Largest |a - b| relative to the largest |b| of the tensor (per-tensor scale, fp32 rounding).
double max_relative_difference(const float* a, const float* b, int64_t n) {
  double diff = 0.0, scale = 1e-12;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Two-layer perceptron without BN: in (N,12) -> linear 16 -> ReLU -> linear 4, params in one arena.
struct Mlp {
  static constexpr int C = 12, H = 16, K = 4;
  std::vector<float> params, grads;
  nostrum::ParameterTable table;
  std::vector<float> hidden, hidden_relu, logits, d_logits, d_hidden;

  explicit Mlp(int max_batch) : params(H * C + H + K * H + K), grads(params.size()) {
    const auto init = random_vector(params.size(), 7, 0.3f);
    std::copy(init.begin(), init.end(), params.begin());
    size_t offset = 0;
    auto add = [&](const char* name, nostrum::Shape shape, nostrum::ParameterKind kind) {
      nostrum::Parameter p;
      p.name = name;
      p.shape = shape;
      p.kind = kind;
      p.value = params.data() + offset;
      p.grad = grads.data() + offset;
      p.offset = offset;
      offset += shape.numel();
      table.push_back(p);
    };
    add("fc1.weight", {H, C}, nostrum::ParameterKind::kWeight);
    add("fc1.bias", {H}, nostrum::ParameterKind::kBias);
    add("fc2.weight", {K, H}, nostrum::ParameterKind::kWeight);
    add("fc2.bias", {K}, nostrum::ParameterKind::kBias);
    hidden.resize(max_batch * H);
    hidden_relu.resize(max_batch * H);
    logits.resize(max_batch * K);
    d_logits.resize(max_batch * K);
    d_hidden.resize(max_batch * H);
  }

  // One forward + backward over n samples; the loss gradient is scaled by grad_scale.
  void gradients(const float* x, const int32_t* labels, int n, float grad_scale) {
    using namespace nostrum::layers;
    linear_forward(hidden.data(), x, table[0].value, table[1].value, n, C, H);
    relu_forward(hidden_relu.data(), hidden.data(), int64_t{n} * H);
    linear_forward(logits.data(), hidden_relu.data(), table[2].value, table[3].value, n, H, K);
    softmax_cross_entropy(d_logits.data(), logits.data(), labels, n, K, 0.1f, grad_scale);
    linear_backward(d_hidden.data(), table[2].grad, table[3].grad, d_logits.data(),
                    hidden_relu.data(), table[2].value, n, H, K);
    relu_backward(d_hidden.data(), d_hidden.data(), hidden_relu.data(), int64_t{n} * H);
    linear_backward(nullptr, table[0].grad, table[1].grad, d_hidden.data(), x, table[0].value, n, C,
                    H);
  }
};

nostrum::optim::SgdOptions sgd_options() {
  nostrum::optim::SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 0.0004f;
  o.exempt_bias_and_norm_from_decay = true;
  return o;
}

}  // namespace

TEST_CASE("P ranks with global batch B train a model without BN like 1 process with batch B",
          "[mpi][data-parallel]") {
  Communicator world;
  const int P = world.size(), local = kGlobalBatch / P, first = world.rank() * local;
  const auto x = random_vector(kGlobalBatch * Mlp::C, 11);
  std::vector<int32_t> labels(kGlobalBatch);
  for (int i = 0; i < kGlobalBatch; ++i) labels[i] = (i * 7) % Mlp::K;

  Mlp distributed(local), reference(kGlobalBatch);
  nostrum::optim::Sgd distributed_sgd(distributed.table, sgd_options());
  nostrum::optim::Sgd reference_sgd(reference.table, sgd_options());
  // Buckets of 40 floats: boundaries fall inside fc1.weight (192 floats).
  nostrum::mpi::GradientAllreducer allreducer(world, distributed.grads.data(),
                                              distributed.grads.size(), 40 * 4e-6, 20 * 4e-6);
  for (int step = 0; step < 5; ++step) {
    const float lr = 0.05f * (step + 1);
    allreducer.begin_step();
    distributed.gradients(x.data() + first * Mlp::C, labels.data() + first, local,
                          1.0f / kGlobalBatch);
    allreducer.finish_step();
    distributed_sgd.step(lr);
    reference.gradients(x.data(), labels.data(), kGlobalBatch, 1.0f / kGlobalBatch);
    reference_sgd.step(lr);
  }
  for (size_t t = 0; t < distributed.table.size(); ++t) {
    INFO(distributed.table[t].name);
    CHECK(max_relative_difference(distributed.table[t].value, reference.table[t].value,
                                  distributed.table[t].numel()) < 1e-5);
  }
  nostrum::mpi::verify_identical(world, distributed.params.data(), distributed.params.size(),
                                 "MLP weights");
}

TEST_CASE("P ranks with sync-BN train a ResNet like 1 process with the whole batch",
          "[mpi][data-parallel]") {
  Communicator world;
  const int P = world.size(), local = kGlobalBatch / P, first = world.rank() * local;
  const int H = 8, W = 8, C = 3;
  const auto images = random_vector(int64_t{kGlobalBatch} * H * W * C, 5);
  std::vector<int32_t> labels(kGlobalBatch);
  for (int i = 0; i < kGlobalBatch; ++i) labels[i] = (i * 3) % 10;

  nostrum::model::ModelConfig config;
  config.name = "resnet8";
  config.num_classes = 10;
  config.in_channels = C;
  config.width = 4;
  auto distributed = nostrum::model::Model::create(config);
  auto reference = nostrum::model::Model::create(config);
  distributed->build(local, H, W);
  reference->build(kGlobalBatch, H, W);
  distributed->init(3);
  reference->init(3);
  nostrum::mpi::MpiReducer bn_reducer(world);
  distributed->set_norm_reducer(&bn_reducer);
  nostrum::optim::Sgd distributed_sgd(distributed->parameters(), sgd_options());
  nostrum::optim::Sgd reference_sgd(reference->parameters(), sgd_options());
  const double bucket_mb = GENERATE(0.0004, 100.0);  // tiny buckets (inside tensors) and one bucket
  nostrum::mpi::GradientAllreducer allreducer(
      world, distributed->gradient_data(), distributed->parameter_count(), bucket_mb, bucket_mb,
      nostrum::mpi::OverlapMode::kOverlap, /*main_thread_calls_mpi=*/true);

  for (int step = 0; step < 3; ++step) {
    const float lr = 0.1f;
    distributed->forward(images.data() + int64_t{first} * H * W * C, local, true);
    distributed->loss(labels.data() + first, 0.1f, 1.0f / kGlobalBatch);
    allreducer.begin_step();
    distributed->backward([&](size_t ready_from) { allreducer.on_ready(ready_from); });
    allreducer.finish_step();
    distributed_sgd.step(lr);
    reference->forward(images.data(), kGlobalBatch, true);
    reference->loss(labels.data(), 0.1f, 1.0f / kGlobalBatch);
    reference->backward();
    reference_sgd.step(lr);
  }
  const auto& mine = distributed->parameters();
  const auto& theirs = reference->parameters();
  REQUIRE(mine.size() == theirs.size());
  for (size_t t = 0; t < mine.size(); ++t) {
    INFO(mine[t].name << " bucket_mb " << bucket_mb);
    CHECK(max_relative_difference(mine[t].value, theirs[t].value, mine[t].numel()) < 1e-4);
  }
  nostrum::mpi::verify_identical(world, distributed->parameter_data(),
                                 distributed->parameter_count(), "ResNet weights");
  nostrum::mpi::verify_identical(world, distributed->buffer_data(), distributed->buffer_count(),
                                 "ResNet running statistics");
}
