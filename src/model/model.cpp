// ResNet model: shape inference and arena layout (build), torchvision init, forward with batch or
// running statistics, loss, and backward in reverse state_dict order so the gradient-ready watermark
// only decreases (a block's downsample branch before its main path).
#include "nostrum/model/model.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "nostrum/core/error.hpp"
#include "nostrum/layers/batch_norm.hpp"
#include "nostrum/layers/conv2d.hpp"
#include "nostrum/layers/cross_entropy.hpp"
#include "nostrum/layers/global_avg_pool.hpp"
#include "nostrum/layers/linear.hpp"
#include "nostrum/layers/max_pool.hpp"
#include "nostrum/layers/residual_add.hpp"

namespace nostrum::model {

namespace {

// The conv options every pass starts from: the model's precision (bf16: kernels/bf16.hpp).
layers::ConvOptions conv_options(const ResNetSpec& spec) {
  layers::ConvOptions options;
  options.precision = spec.precision;
  return options;
}

// A convolution followed by batch norm (and optionally ReLU, fused into the BN).
struct ConvBn {
  std::string conv_name, bn_name;
  layers::ConvGeometry g;  // N = max batch; forward/backward use a copy with N = the batch
  bool relu = false;
  size_t weight = 0, gamma = 0, beta = 0, running_mean = 0, running_var = 0, batches = 0;  // table
  float* c = nullptr;  // conv output (N,P,Q,K)
  float* a = nullptr;  // BN(+ReLU) output (N,P,Q,K)
  float* save_mean = nullptr;
  float* save_invstd = nullptr;
  int64_t out_per_image() const { return int64_t(g.P()) * g.Q() * g.K; }
};

struct Block {
  std::string add_name;
  std::vector<ConvBn> path;
  bool has_down = false;
  ConvBn down;
  const float* in = nullptr;  // block input (N,H,W,C): previous block's output, pool or stem
  int64_t in_per_image = 0;
  float* out() const { return path.back().a; }  // add+ReLU runs in place on the last BN's output
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1) from a counter: element i of stream `key` (thread-count independent).
double uniform01(uint64_t key, uint64_t i) {
  return (static_cast<double>(splitmix64(key ^ splitmix64(i)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

struct Model::Impl {
  ConvBn stem;
  bool has_pool = false;
  layers::PoolGeometry pool;
  float* pool_out = nullptr;
  std::vector<int32_t> argmax;  // (N,P,Q,C) of the max-pool
  std::vector<Block> blocks;
  std::vector<size_t> last_gammas;  // table indices of each block's last BN gamma
  int fc_in = 0, fc_out = 0;
  size_t fc_weight = 0, fc_bias = 0;
  int final_hw = 0;
  float* pooled = nullptr;    // (N, fc_in)
  float* logits = nullptr;    // (N, classes)
  float* d_logits = nullptr;  // (N, classes)
  float* d_pooled = nullptr;  // (N, fc_in)
  float* grad[4] = {};        // (N, max activation per image) each
  std::vector<double> bn_scratch;
  float* conv_scratch = nullptr;
  const float* input = nullptr;  // the last forward's images (the stem's backward reads them)
  std::string pool_name = "maxpool", avgpool_name = "avgpool", fc_name = "fc";
};

std::unique_ptr<Model> Model::create(const ModelConfig& config) {
  return std::make_unique<Model>(resnet_spec(config));
}

Model::Model(const ResNetSpec& spec) : spec_(spec), impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

void Model::build(int max_batch, int height, int width) {
  NOSTRUM_CHECK(impl_->blocks.empty(), ShapeError, "model already built", "model " + spec_.name);
  NOSTRUM_CHECK(max_batch > 0 && height > 0 && width > 0, ShapeError,
                "batch and image size must be positive, got batch " + std::to_string(max_batch) +
                    " image " + std::to_string(height) + "x" + std::to_string(width),
                "model " + spec_.name);
  max_batch_ = max_batch;
  height_ = height;
  width_ = width;
  Impl& m = *impl_;
  auto add = [&](const std::string& name, Shape shape, ParameterKind kind) {
    Parameter p;
    p.name = name;
    p.shape = shape;
    p.kind = kind;
    table_.push_back(p);
    return table_.size() - 1;
  };
  auto make_conv_bn = [&](const std::string& conv_name, const std::string& bn_name, int C, int K,
                          int R, int stride, int pad, int H, int W, bool relu) {
    ConvBn cb;
    cb.conv_name = conv_name;
    cb.bn_name = bn_name;
    cb.g = layers::ConvGeometry{max_batch, H, W, C, K, R, R, stride, pad};
    NOSTRUM_CHECK(H + 2 * pad >= R && W + 2 * pad >= R, ShapeError,
                  "image " + std::to_string(height) + "x" + std::to_string(width) +
                      " is too small: " + conv_name + " gets " + std::to_string(H) + "x" +
                      std::to_string(W),
                  "model " + spec_.name, "use a larger image size");
    cb.relu = relu;
    cb.weight = add(conv_name + ".weight", Shape{K, C, R, R}, ParameterKind::kWeight);
    cb.gamma = add(bn_name + ".weight", Shape{K}, ParameterKind::kNormScale);
    cb.beta = add(bn_name + ".bias", Shape{K}, ParameterKind::kNormShift);
    cb.running_mean = add(bn_name + ".running_mean", Shape{K}, ParameterKind::kBuffer);
    cb.running_var = add(bn_name + ".running_var", Shape{K}, ParameterKind::kBuffer);
    cb.batches = add(bn_name + ".num_batches_tracked", Shape{}, ParameterKind::kBuffer);
    return cb;
  };

  // ---- structure, in state_dict order ----
  const int w0 = spec_.base_width;
  if (spec_.imagenet_stem) {
    m.stem = make_conv_bn("conv1", "bn1", spec_.in_channels, w0, 7, 2, 3, height, width, true);
    m.has_pool = true;
    m.pool = layers::PoolGeometry{max_batch, m.stem.g.P(), m.stem.g.Q(), w0, 3, 3, 2, 1};
  } else {
    m.stem = make_conv_bn("conv1", "bn1", spec_.in_channels, w0, 3, 1, 1, height, width, true);
  }
  int H = m.has_pool ? m.pool.P() : m.stem.g.P();
  int W = m.has_pool ? m.pool.Q() : m.stem.g.Q();
  int in_planes = w0;
  const int expansion = spec_.bottleneck ? 4 : 1;
  for (size_t stage = 0; stage < spec_.blocks.size(); ++stage) {
    const int planes = w0 << stage;
    for (int b = 0; b < spec_.blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      Block block;
      block.add_name = prefix + "add";
      block.in_per_image = int64_t(H) * W * in_planes;
      if (spec_.bottleneck) {
        block.path.push_back(make_conv_bn(prefix + "conv1", prefix + "bn1", in_planes, planes, 1, 1, 0, H, W, true));
        block.path.push_back(make_conv_bn(prefix + "conv2", prefix + "bn2", planes, planes, 3, stride, 1, H, W, true));
        const auto& c2 = block.path.back().g;
        block.path.push_back(make_conv_bn(prefix + "conv3", prefix + "bn3", planes, planes * 4, 1, 1, 0, c2.P(), c2.Q(), false));
      } else {
        block.path.push_back(make_conv_bn(prefix + "conv1", prefix + "bn1", in_planes, planes, 3, stride, 1, H, W, true));
        const auto& c1 = block.path.back().g;
        block.path.push_back(make_conv_bn(prefix + "conv2", prefix + "bn2", planes, planes, 3, 1, 1, c1.P(), c1.Q(), false));
      }
      m.last_gammas.push_back(block.path.back().gamma);
      if (stride != 1 || in_planes != planes * expansion) {
        block.has_down = true;
        block.down = make_conv_bn(prefix + "downsample.0", prefix + "downsample.1", in_planes,
                                  planes * expansion, 1, stride, 0, H, W, false);
      }
      H = block.path.back().g.P();
      W = block.path.back().g.Q();
      in_planes = planes * expansion;
      m.blocks.push_back(std::move(block));
    }
  }
  m.final_hw = H * W;
  m.fc_in = in_planes;
  m.fc_out = spec_.num_classes;
  m.fc_weight = add("fc.weight", Shape{m.fc_out, m.fc_in}, ParameterKind::kWeight);
  m.fc_bias = add("fc.bias", Shape{m.fc_out}, ParameterKind::kBias);

  // ---- parameter, gradient and buffer arenas: one contiguous run each, state_dict order ----
  for (auto& p : table_) {
    size_t& count = p.trainable() ? parameter_count_ : buffer_count_;
    p.offset = count;
    count += static_cast<size_t>(p.numel());
  }
  params_ = Arena(parameter_count_, spec_.name + " parameters");
  grads_ = Arena(parameter_count_, spec_.name + " gradients");
  buffers_ = Arena(buffer_count_, spec_.name + " buffers");
  for (auto& p : table_) {
    if (p.trainable()) {
      p.value = params_.data() + p.offset;
      p.grad = grads_.data() + p.offset;
    } else {
      p.value = buffers_.data() + p.offset;
    }
  }

  // ---- activations: counted once, then taken from one arena ----
  std::vector<ConvBn*> all;
  all.push_back(&m.stem);
  for (auto& b : m.blocks) {
    for (auto& cb : b.path) all.push_back(&cb);
    if (b.has_down) all.push_back(&b.down);
  }
  int64_t max_per_image = 0;
  size_t scratch_floats = 0, bn_doubles = 0;
  training_flops_per_image_ = 0.0;
  for (ConvBn* cb : all) {
    max_per_image = std::max(max_per_image, cb->out_per_image());
    scratch_floats = std::max(scratch_floats, layers::conv2d_scratch_floats(cb->g, conv_options(spec_)));
    bn_doubles = std::max(bn_doubles, layers::batch_norm_scratch_doubles(cb->g.K));
    layers::ConvGeometry one = cb->g;
    one.N = 1;
    training_flops_per_image_ += one.forward_flops() * (cb == &m.stem ? 2.0 : 3.0);
  }
  training_flops_per_image_ += 2.0 * m.fc_in * m.fc_out * 3.0;
  max_per_image = std::max<int64_t>(max_per_image, int64_t(height) * width * spec_.in_channels);
  const size_t N = static_cast<size_t>(max_batch);
  auto walk = [&](auto&& take) {
    for (ConvBn* cb : all) {
      cb->c = take(N * cb->out_per_image());
      cb->a = take(N * cb->out_per_image());
      cb->save_mean = take(cb->g.K);
      cb->save_invstd = take(cb->g.K);
    }
    if (m.has_pool) m.pool_out = take(N * m.pool.P() * m.pool.Q() * m.pool.C);
    m.pooled = take(N * m.fc_in);
    m.logits = take(N * m.fc_out);
    m.d_logits = take(N * m.fc_out);
    m.d_pooled = take(N * m.fc_in);
    for (auto& g : m.grad) g = take(N * max_per_image);
  };
  size_t activation_floats = 0;
  walk([&](size_t n) -> float* { activation_floats += Arena::padded(n); return nullptr; });
  activations_ = Arena(activation_floats, spec_.name + " activations");
  walk([&](size_t n) { return activations_.take(n, "activations"); });
  scratch_ = Arena(scratch_floats, spec_.name + " conv scratch");
  m.conv_scratch = scratch_.data();
  m.bn_scratch.assign(bn_doubles, 0.0);
  if (m.has_pool) m.argmax.assign(N * m.pool.P() * m.pool.Q() * m.pool.C, 0);
  const float* x = m.has_pool ? m.pool_out : m.stem.a;
  for (auto& b : m.blocks) {
    b.in = x;
    x = b.out();
  }
}

double Model::layer_flops_per_image(const std::string& layer) const {
  const Impl& m = *impl_;
  auto conv_flops = [](const ConvBn& cb) {
    layers::ConvGeometry one = cb.g;
    one.N = 1;
    return one.forward_flops();
  };
  if (layer == m.stem.conv_name) return conv_flops(m.stem);
  for (const auto& b : m.blocks) {
    for (const auto& cb : b.path)
      if (layer == cb.conv_name) return conv_flops(cb);
    if (b.has_down && layer == b.down.conv_name) return conv_flops(b.down);
  }
  if (layer == m.fc_name) return 2.0 * m.fc_in * m.fc_out;
  return 0.0;
}

const Parameter& Model::parameter(const std::string& name) const {
  for (const auto& p : table_)
    if (p.name == name) return p;
  throw ShapeError("no parameter or buffer named '" + name + "'", "model " + spec_.name);
}

size_t Model::activation_bytes() const {
  return (activations_.capacity() + scratch_.capacity()) * sizeof(float) +
         impl_->bn_scratch.size() * sizeof(double) + impl_->argmax.size() * sizeof(int32_t);
}

void Model::set_norm_reducer(Reducer* reducer) { reducer_ = reducer; }
void Model::set_observer(LayerObserver* observer) { observer_ = observer; }

void Model::init(uint64_t seed) {
  NOSTRUM_CHECK(!table_.empty(), ShapeError, "init before build", "model " + spec_.name);
  Impl& m = *impl_;
  for (size_t index = 0; index < table_.size(); ++index) {
    Parameter& p = table_[index];
    const int64_t n = p.numel();
    float* v = p.value;
    const uint64_t key = splitmix64(seed * 0x100000001B3ull + index);
    const bool is_last_gamma =
        std::find(m.last_gammas.begin(), m.last_gammas.end(), index) != m.last_gammas.end();
    auto ends_with = [&](const std::string& suffix) {
      return p.name.size() >= suffix.size() &&
             p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (p.kind == ParameterKind::kWeight && p.shape.rank() == 4) {
      // Kaiming normal, mode fan_out, ReLU gain: std = sqrt(2 / (K*R*S))
      const double stddev = std::sqrt(2.0 / (p.shape[0] * p.shape[2] * p.shape[3]));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const double u1 = uniform01(key, 2 * i), u2 = uniform01(key, 2 * i + 1);
        v[i] = static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
      }
    } else if (index == m.fc_weight || index == m.fc_bias) {
      // PyTorch's nn.Linear default: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
      const double bound = 1.0 / std::sqrt(static_cast<double>(m.fc_in));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(bound * (2.0 * uniform01(key, i) - 1.0));
    } else {
      float value = 0.0f;  // beta, running_mean, num_batches_tracked
      if (p.kind == ParameterKind::kNormScale) value = (spec_.zero_init_residual && is_last_gamma) ? 0.0f : 1.0f;
      if (ends_with(".running_var")) value = 1.0f;
      std::fill(v, v + n, value);
    }
  }
}

const float* Model::forward(const float* images, int n, bool training) {
  NOSTRUM_CHECK(!table_.empty(), ShapeError, "forward before build", "model " + spec_.name);
  NOSTRUM_CHECK(n >= 1 && n <= max_batch_, ShapeError,
                "batch of " + std::to_string(n) + " images, built for 1.." + std::to_string(max_batch_),
                "model " + spec_.name);
  Impl& m = *impl_;
  m.input = images;
  batch_ = n;
  last_training_ = training;
  have_loss_ = false;
  auto timed = [&](const std::string& name, auto&& fn) {
    if (!observer_) {
      fn();
      return;
    }
    const double t0 = omp_get_wtime();
    fn();
    observer_->on_layer(name, Phase::kForward, t0, omp_get_wtime());
  };
  // conv + BN (+ReLU); with a residual, the block's shortcut add and ReLU join the BN's pass.
  auto run = [&](ConvBn& cb, const float* in, const float* residual = nullptr) {
    layers::ConvGeometry g = cb.g;
    g.N = n;
    timed(cb.conv_name, [&] {
      layers::conv2d_forward(cb.c, in, table_[cb.weight].value, g, m.conv_scratch,
                             conv_options(spec_));
    });
    layers::BatchNormOptions o;
    o.fuse_relu = cb.relu || residual != nullptr;
    o.residual = residual;
    o.reducer = reducer_;
    const int64_t rows = int64_t(n) * g.P() * g.Q();
    timed(cb.bn_name, [&] {
      if (training) {
        layers::batch_norm_forward_training(
            cb.a, cb.save_mean, cb.save_invstd, table_[cb.running_mean].value,
            table_[cb.running_var].value, cb.c, table_[cb.gamma].value, table_[cb.beta].value,
            rows, g.K, o, m.bn_scratch.data());
        table_[cb.batches].value[0] += 1.0f;
      } else {
        layers::batch_norm_forward_inference(cb.a, cb.c, table_[cb.gamma].value,
                                             table_[cb.beta].value, table_[cb.running_mean].value,
                                             table_[cb.running_var].value, rows, g.K, o);
      }
    });
  };
  run(m.stem, images);
  if (m.has_pool) {
    layers::PoolGeometry g = m.pool;
    g.N = n;
    timed(m.pool_name, [&] { layers::max_pool_forward(m.pool_out, m.argmax.data(), m.stem.a, g); });
  }
  for (auto& b : m.blocks) {
    // The shortcut first, so that the last BN of the path can add it (and apply the ReLU) in its
    // own pass: out = relu(bn3(conv3) + shortcut), bit-identical to BN, then add + ReLU.
    const float* shortcut = b.in;
    if (b.has_down) {
      run(b.down, b.in);
      shortcut = b.down.a;
    }
    const float* h = b.in;
    for (size_t i = 0; i < b.path.size(); ++i) {
      run(b.path[i], h, i + 1 == b.path.size() ? shortcut : nullptr);
      h = b.path[i].a;
    }
  }
  const float* last = m.blocks.back().out();
  timed(m.avgpool_name, [&] { layers::global_avg_pool_forward(m.pooled, last, n, m.final_hw, m.fc_in); });
  timed(m.fc_name, [&] {
    layers::linear_forward(m.logits, m.pooled, table_[m.fc_weight].value, table_[m.fc_bias].value,
                           n, m.fc_in, m.fc_out, spec_.precision);
  });
  return m.logits;
}

double Model::loss(const int32_t* labels, float label_smoothing, float grad_scale) {
  NOSTRUM_CHECK(batch_ > 0, ShapeError, "loss before forward", "model " + spec_.name);
  have_loss_ = true;
  return layers::softmax_cross_entropy(impl_->d_logits, impl_->logits, labels, batch_,
                                       impl_->fc_out, label_smoothing, grad_scale);
}

int Model::count_correct(const int32_t* labels) const {
  return layers::count_top1_correct(impl_->logits, labels, batch_, impl_->fc_out);
}

void Model::backward(const GradientReadyCallback& on_ready) {
  NOSTRUM_CHECK(last_training_ && have_loss_, ShapeError,
                "backward needs a training forward and a loss first", "model " + spec_.name);
  Impl& m = *impl_;
  const int n = batch_;
  auto timed_as = [&](const std::string& name, Phase phase, auto&& fn) {
    if (!observer_) {
      fn();
      return;
    }
    const double t0 = omp_get_wtime();
    fn();
    observer_->on_layer(name, phase, t0, omp_get_wtime());
  };
  auto timed = [&](const std::string& name, auto&& fn) { timed_as(name, Phase::kBackward, fn); };
  auto ready = [&](size_t table_index) {
    if (on_ready) on_ready(table_[table_index].offset);
  };
  // BN backward: d_out -> d_in (may alias when the BN is fused with ReLU and d_out is a temp).
  auto bn_back = [&](ConvBn& cb, float* d_in, const float* d_out) {
    layers::BatchNormOptions o;
    o.fuse_relu = cb.relu;
    o.reducer = reducer_;
    const int64_t rows = int64_t(n) * cb.g.P() * cb.g.Q();
    timed(cb.bn_name, [&] {
      layers::batch_norm_backward(d_in, table_[cb.gamma].grad, table_[cb.beta].grad, d_out, cb.c,
                                  cb.a, table_[cb.gamma].value, cb.save_mean, cb.save_invstd, rows,
                                  cb.g.K, o, m.bn_scratch.data());
    });
    ready(cb.gamma);
  };
  // d_in = (or, with accumulate, +=) the conv's input gradient.
  auto conv_back = [&](ConvBn& cb, float* d_in, const float* d_out, const float* in,
                       bool accumulate = false) {
    layers::ConvGeometry g = cb.g;
    g.N = n;
    // The weight gradient first: it is ready for the allreduce before the data gradient runs.
    timed_as(cb.conv_name, Phase::kBackwardWeights, [&] {
      layers::conv2d_backward_weights(table_[cb.weight].grad, d_out, in, g, m.conv_scratch,
                                      conv_options(spec_));
    });
    ready(cb.weight);
    if (d_in == nullptr) return;
    timed(cb.conv_name, [&] {
      layers::ConvOptions options = conv_options(spec_);
      options.accumulate_d_in = accumulate;
      layers::conv2d_backward_data(d_in, d_out, table_[cb.weight].value, g, m.conv_scratch,
                                   options);
    });
  };

  float* G = m.grad[0];   // gradient of the current block's output
  float* DX = m.grad[1];  // gradient of its input
  float* T1 = m.grad[2];
  float* T2 = m.grad[3];
  timed(m.fc_name, [&] {
    layers::linear_backward(m.d_pooled, table_[m.fc_weight].grad, table_[m.fc_bias].grad,
                            m.d_logits, m.pooled, table_[m.fc_weight].value, n, m.fc_in, m.fc_out,
                            spec_.precision);
  });
  ready(m.fc_weight);
  timed(m.avgpool_name, [&] {
    layers::global_avg_pool_backward(G, m.d_pooled, n, m.final_hw, m.fc_in);
  });
  for (auto it = m.blocks.rbegin(); it != m.blocks.rend(); ++it) {
    Block& b = *it;
    const int64_t out_count = n * b.path.back().out_per_image();
    timed(b.add_name, [&] { layers::add_relu_backward(G, G, b.out(), out_count); });
    if (b.has_down) {
      bn_back(b.down, T1, G);
      conv_back(b.down, DX, T1, b.in);
    }
    // The block input's gradient is the shortcut's plus the path's: the first conv of the path
    // adds its input gradient onto the shortcut's (DX from the downsample, or G itself for an
    // identity shortcut, which nothing reads after the last BN's backward).
    float* cur = G;
    for (int i = static_cast<int>(b.path.size()) - 1; i >= 0; --i) {
      ConvBn& cb = b.path[i];
      float* bn_dst = (cur == G) ? T1 : cur;
      bn_back(cb, bn_dst, cur);
      float* other = (bn_dst == T1) ? T2 : T1;
      if (i == 0) {
        conv_back(cb, b.has_down ? DX : G, bn_dst, b.in, true);
      } else {
        conv_back(cb, other, bn_dst, b.path[i - 1].a);
        cur = other;
      }
    }
    if (b.has_down) std::swap(G, DX);
  }
  float* d_stem = G;
  if (m.has_pool) {
    layers::PoolGeometry g = m.pool;
    g.N = n;
    timed(m.pool_name, [&] { layers::max_pool_backward(T1, G, m.argmax.data(), g); });
    d_stem = T1;
  }
  bn_back(m.stem, d_stem, d_stem);
  conv_back(m.stem, nullptr, d_stem, m.input);
}

}  // namespace nostrum::model
