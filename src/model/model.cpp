// ResNet model as one table: build() turns the architecture into a list of blocks (the stem, each
// residual block, the head), each a short list of layers (conv, batch norm, max-pool, global
// average pool, linear) in state_dict order. The parameter table, the arenas, init, forward,
// backward and the FLOP counts all walk that one list; what differs by layer kind is one switch per
// action below, so a new layer kind is a new LayerKind and its cases (the compiler's -Wswitch names
// any action that lacks one). Activations are NHWC (N, H, W, C); gradients of block boundaries and
// of layers inside a block live in four buffers assigned once by build().
#include "nostrum/model/model.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "nostrum/core/error.hpp"
#include "nostrum/core/splitmix64.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "nostrum/layers/batch_norm.hpp"
#include "nostrum/layers/conv2d.hpp"
#include "nostrum/layers/cross_entropy.hpp"
#include "nostrum/layers/global_avg_pool.hpp"
#include "nostrum/layers/linear.hpp"
#include "nostrum/layers/max_pool.hpp"
#include "nostrum/layers/residual_add.hpp"

namespace nostrum::model {

namespace {

// ---------------------------------------------------------------------------------------------
// The table: layers and blocks
// ---------------------------------------------------------------------------------------------

enum class LayerKind { kConv, kBatchNorm, kMaxPool, kGlobalAvgPool, kLinear };

// One image's activation shape (H, W, C); (1, 1, C) for a feature vector.
struct ImageShape {
  int H = 1, W = 1, C = 1;
  int64_t floats() const { return int64_t(H) * W * C; }
};

struct Layer {
  LayerKind kind = LayerKind::kConv;
  std::string
      name;  // torchvision's module name ("layer1.0.conv1"): parameter keys and the observer
  ImageShape in, out;
  layers::ConvGeometry conv;  // kConv, kLinear (1x1 on 1x1); N = max batch (a pass: N = the batch)
  layers::PoolGeometry pool;  // kMaxPool; likewise
  bool relu = false;          // kBatchNorm: ReLU fused into it
  bool last_of_residual_path = false;  // kBatchNorm: gamma starts at 0 with zero_init_residual
  bool input_gradient = true;          // false for the model's first layer (the images)
  // bf16 runs: a conv whose output gradient travels in bf16, written so by the batch norm after
  // it (which then has this set too), where both its backward kernels take it (set_conv_kernels).
  bool bf16_gradient = false;
  // bf16 runs: a batch norm whose output travels in bf16 (kept in its output buffer as bf16) and
  // the conv after it that reads it so (bf16_input), where that conv's forward and weight-gradient
  // kernels take it and nothing else reads the output (the batch norms inside a residual path);
  // likewise a conv whose forward kernel writes its output in bf16 and the batch norm after it,
  // which reads it so in forward and backward (link_bf16_conv_outputs).
  bool bf16_output = false, bf16_input = false;
  size_t first_parameter = 0;  // table index of its first entry (parameter_specs order)
  // Tensors, set by build. input: (N, in) images, arena or another layer's output.
  const float* input = nullptr;
  float* output = nullptr;        // (N, out)
  float* batch_mean = nullptr;    // kBatchNorm: the training batch's mean (C), kept for backward
  float* batch_invstd = nullptr;  // kBatchNorm: its 1/sqrt(var + eps) (C)
  // A residual block's batch norm that reads the add + ReLU backward's gradient (the path's last,
  // a downsample's): where that pass writes this norm's first backward pass's sums
  // (batch_norm_backward_sums_doubles; one of two slots the blocks share, as they run in turn).
  double* backward_sums = nullptr;
  int32_t* winners = nullptr;  // kMaxPool: each output's winning input position (N, out)
  // kConv and kLinear (runs_conv_kernels): the chosen kernel of each pass (kernels::ConvPass
  // order), prepared at the max batch; layers of one shape share them (set_conv_kernels).
  // backward_data is null for the stem.
  std::shared_ptr<kernels::PreparedConv> kernel[3];
};

// Convolutions and the classifier (a 1x1 convolution of a 1x1 image) run on the conv kernel table.
bool runs_conv_kernels(const Layer& l) {
  return l.kind == LayerKind::kConv || l.kind == LayerKind::kLinear;
}

// A run of layers with one input and one output; a residual block adds a shortcut:
// block_output = ReLU(path(block_input) + shortcut(block_input)), the add and the ReLU fused into
// the path's last batch norm. An empty shortcut is the identity.
struct Block {
  std::vector<Layer> path;
  bool residual = false;
  std::vector<Layer> shortcut;  // residual only: the downsample layers, or empty
  std::string add_name;         // residual: "layer1.0.add", the add + ReLU gradient's name
  // Gradient buffers, assigned by build: the block's output gradient, and its input's. A residual
  // block with an identity shortcut has d_block_input == d_block_output (the path adds onto it);
  // the first block has none (the images need no gradient).
  float* d_block_output = nullptr;
  float* d_block_input = nullptr;
  const float* input() const { return path.front().input; }
  float* output() const { return path.back().output; }
  ImageShape out() const { return path.back().out; }
};

// ---- the layers a builder appends: each takes the previous output shape ----

Layer conv_layer(const std::string& name, ImageShape in, int K, int R, int stride, int pad) {
  Layer l;
  l.kind = LayerKind::kConv;
  l.name = name;
  l.in = in;
  l.conv = layers::ConvGeometry{1, in.H, in.W, in.C, K, R, R, stride, pad};
  l.out = ImageShape{l.conv.P(), l.conv.Q(), K};
  return l;
}

Layer batch_norm_layer(const std::string& name, ImageShape in, bool relu) {
  Layer l;
  l.kind = LayerKind::kBatchNorm;
  l.name = name;
  l.in = l.out = in;
  l.relu = relu;
  return l;
}

Layer max_pool_layer(const std::string& name, ImageShape in, int R, int stride, int pad) {
  Layer l;
  l.kind = LayerKind::kMaxPool;
  l.name = name;
  l.in = in;
  l.pool = layers::PoolGeometry{1, in.H, in.W, in.C, R, R, stride, pad};
  l.out = ImageShape{l.pool.P(), l.pool.Q(), in.C};
  return l;
}

Layer global_avg_pool_layer(const std::string& name, ImageShape in) {
  Layer l;
  l.kind = LayerKind::kGlobalAvgPool;
  l.name = name;
  l.in = in;
  l.out = ImageShape{1, 1, in.C};
  return l;
}

Layer linear_layer(const std::string& name, ImageShape in, int outputs) {
  NOSTRUM_CHECK(in.H == 1 && in.W == 1, ShapeError, "a linear layer takes one vector per image",
                "layer " + name + ": input " + std::to_string(in.H) + "x" + std::to_string(in.W) +
                    "x" + std::to_string(in.C));
  Layer l;
  l.kind = LayerKind::kLinear;
  l.name = name;
  l.in = in;
  l.out = ImageShape{1, 1, outputs};
  // Its products as a 1x1 convolution of a 1x1 image: the conv kernel table runs them.
  l.conv = layers::ConvGeometry{1, 1, 1, in.C, outputs, 1, 1, 1, 0};
  return l;
}

// Appends conv + BN (+ ReLU) named prefix + conv_name / bn_name to `layers`; returns the output.
ImageShape conv_bn(std::vector<Layer>& layers, const std::string& conv_name,
                   const std::string& bn_name, ImageShape in, int K, int R, int stride, int pad,
                   bool relu) {
  layers.push_back(conv_layer(conv_name, in, K, R, stride, pad));
  layers.push_back(batch_norm_layer(bn_name, layers.back().out, relu));
  return layers.back().out;
}

// ---- the blocks: torchvision's ResNet stem, BasicBlock, Bottleneck (v1.5) and head ----

Block stem_block(const ResNetSpec& spec, ImageShape image) {
  Block b;
  if (spec.imagenet_stem) {
    const ImageShape x = conv_bn(b.path, "conv1", "bn1", image, spec.base_width, 7, 2, 3, true);
    b.path.push_back(max_pool_layer("maxpool", x, 3, 2, 1));
  } else {
    conv_bn(b.path, "conv1", "bn1", image, spec.base_width, 3, 1, 1, true);
  }
  b.path.front().input_gradient = false;
  return b;
}

// A residual block "layer<stage>.<index>": BasicBlock (3x3, 3x3) or Bottleneck (1x1, 3x3 with the
// stride, 1x1 to 4 x planes), with a 1x1-conv + BN downsample where the shape changes.
Block residual_block(const std::string& prefix, ImageShape in, int planes, int stride,
                     bool bottleneck) {
  Block b;
  b.residual = true;
  b.add_name = prefix + "add";
  const int out_channels = bottleneck ? planes * 4 : planes;
  ImageShape x = in;
  if (bottleneck) {
    x = conv_bn(b.path, prefix + "conv1", prefix + "bn1", x, planes, 1, 1, 0, true);
    x = conv_bn(b.path, prefix + "conv2", prefix + "bn2", x, planes, 3, stride, 1, true);
    conv_bn(b.path, prefix + "conv3", prefix + "bn3", x, out_channels, 1, 1, 0, false);
  } else {
    x = conv_bn(b.path, prefix + "conv1", prefix + "bn1", x, planes, 3, stride, 1, true);
    conv_bn(b.path, prefix + "conv2", prefix + "bn2", x, planes, 3, 1, 1, false);
  }
  b.path.back().last_of_residual_path = true;
  if (stride != 1 || in.C != out_channels)
    conv_bn(b.shortcut, prefix + "downsample.0", prefix + "downsample.1", in, out_channels, 1,
            stride, 0, false);
  return b;
}

Block head_block(ImageShape in, int classes) {
  Block b;
  b.path.push_back(global_avg_pool_layer("avgpool", in));
  b.path.push_back(linear_layer("fc", b.path.back().out, classes));
  return b;
}

// The one table: every block of the model, in state_dict (and forward) order.
std::vector<Block> resnet_blocks(const ResNetSpec& spec, ImageShape image) {
  std::vector<Block> blocks;
  blocks.push_back(stem_block(spec, image));
  ImageShape x = blocks.back().out();
  for (size_t stage = 0; stage < spec.blocks.size(); ++stage) {
    const int planes = spec.base_width << stage;
    for (int i = 0; i < spec.blocks[stage]; ++i) {
      const int stride = (stage > 0 && i == 0) ? 2 : 1;
      const std::string prefix =
          "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".";
      blocks.push_back(residual_block(prefix, x, planes, stride, spec.bottleneck));
      x = blocks.back().out();
    }
  }
  blocks.push_back(head_block(x, spec.num_classes));
  for (const Block& b : blocks)  // forward fuses the add + ReLU into it
    NOSTRUM_CHECK(!b.residual || b.path.back().kind == LayerKind::kBatchNorm, ShapeError,
                  "a residual path must end in a batch norm", "model " + spec.name);
  return blocks;
}

// Every layer of the table in state_dict order: a block's path, then its shortcut.
template <class Blocks, class Fn>
void for_each_layer(Blocks& blocks, Fn&& fn) {
  for (auto& b : blocks) {
    for (auto& l : b.path) fn(l);
    for (auto& l : b.shortcut) fn(l);
  }
}

// ---------------------------------------------------------------------------------------------
// What each layer kind has: parameters, sizes, FLOPs, init
// ---------------------------------------------------------------------------------------------

struct ParameterSpec {
  std::string suffix;  // appended to the layer name: the state_dict key
  Shape shape;
  ParameterKind kind;
};

// Entry k of a layer's parameters and buffers, as parameter_specs lists them: a conv's or linear's
// weight and bias, a batch norm's gamma ("weight"), beta ("bias") and running statistics.
namespace entry {
constexpr int kWeight = 0, kBias = 1, kRunningMean = 2, kRunningVar = 3, kBatchesTracked = 4;
}

// The parameters and buffers of a layer, in state_dict order; the first is what gradient-ready
// reports (a conv's or linear's weight, a BN's gamma: every later entry is final with it).
std::vector<ParameterSpec> parameter_specs(const Layer& l) {
  const int C = l.in.C, K = l.out.C;
  switch (l.kind) {
    case LayerKind::kConv:
      return {{".weight", Shape{K, C, l.conv.R, l.conv.S}, ParameterKind::kWeight}};
    case LayerKind::kBatchNorm:
      return {{".weight", Shape{C}, ParameterKind::kNormScale},
              {".bias", Shape{C}, ParameterKind::kNormShift},
              {".running_mean", Shape{C}, ParameterKind::kBuffer},
              {".running_var", Shape{C}, ParameterKind::kBuffer},
              {".num_batches_tracked", Shape{}, ParameterKind::kBuffer}};
    case LayerKind::kLinear:
      return {{".weight", Shape{K, C}, ParameterKind::kWeight},
              {".bias", Shape{K}, ParameterKind::kBias}};
    case LayerKind::kMaxPool:
    case LayerKind::kGlobalAvgPool:
      return {};
  }
  return {};
}

// Multiply-adds x2 of one image's forward pass (conv and linear; 0 for the rest). Backward-data
// and backward-weights cost the same each.
double forward_flops_per_image(const Layer& l) {
  switch (l.kind) {
    case LayerKind::kConv: {
      layers::ConvGeometry one = l.conv;
      one.N = 1;
      return one.forward_flops();
    }
    case LayerKind::kLinear:
      return 2.0 * l.in.C * l.out.C;
    case LayerKind::kBatchNorm:
    case LayerKind::kMaxPool:
    case LayerKind::kGlobalAvgPool:
      return 0.0;
  }
  return 0.0;
}

// Uniform in (0, 1) from a counter: element i of stream `key` (thread-count independent).
double uniform01(uint64_t key, uint64_t i) {
  return (static_cast<double>(splitmix64(key ^ splitmix64(i)) >> 11) + 0.5) *
         (1.0 / 9007199254740992.0);
}

// Kaiming normal (Box-Muller from counter-based uniforms).
void fill_normal(Parameter& p, uint64_t key, double stddev) {
  const int64_t n = p.numel();
  float* v = p.value;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = uniform01(key, 2 * i), u2 = uniform01(key, 2 * i + 1);
    v[i] = static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }
}

void fill_uniform(Parameter& p, uint64_t key, double bound) {
  const int64_t n = p.numel();
  float* v = p.value;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(bound * (2.0 * uniform01(key, i) - 1.0));
}

void fill(Parameter& p, float value) {
  std::fill(p.value, p.value + p.numel(), value);
}

// Torchvision's initialisation of one layer's parameters; entry k's random stream is keyed by the
// seed and its table index.
void init_layer(const Layer& l, ParameterTable& table, uint64_t seed, bool zero_init_residual) {
  auto key = [&](size_t k) { return splitmix64(seed * 0x100000001B3ull + l.first_parameter + k); };
  Parameter* p = table.data() + l.first_parameter;
  switch (l.kind) {
    case LayerKind::kConv:  // Kaiming normal, mode fan_out, ReLU gain: std = sqrt(2 / (K*R*S))
      fill_normal(p[entry::kWeight], key(entry::kWeight),
                  std::sqrt(2.0 / (l.conv.K * l.conv.R * l.conv.S)));
      break;
    case LayerKind::kBatchNorm:  // gamma, beta, running mean, running var, num_batches_tracked
      fill(p[entry::kWeight], zero_init_residual && l.last_of_residual_path ? 0.0f : 1.0f);
      fill(p[entry::kBias], 0.0f);
      fill(p[entry::kRunningMean], 0.0f);
      fill(p[entry::kRunningVar], 1.0f);
      fill(p[entry::kBatchesTracked], 0.0f);
      break;
    case LayerKind::kLinear: {  // nn.Linear's default: uniform(+-1/sqrt(fan_in)), weight and bias
      const double bound = 1.0 / std::sqrt(static_cast<double>(l.in.C));
      fill_uniform(p[entry::kWeight], key(entry::kWeight), bound);
      fill_uniform(p[entry::kBias], key(entry::kBias), bound);
      break;
    }
    case LayerKind::kMaxPool:
    case LayerKind::kGlobalAvgPool:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Forward and backward of one layer, one chain of layers, one block
// ---------------------------------------------------------------------------------------------

// What a forward or backward pass shares: the batch, the parameters, scratch and the hooks.
struct Pass {
  explicit Pass(ParameterTable& parameters) : table(parameters) {}
  ParameterTable& table;
  Reducer* reducer = nullptr;
  LayerObserver* observer = nullptr;
  const GradientReadyCallback* on_ready = nullptr;
  layers::ConvOptions conv_options;  // every conv pass's (defaults; see Impl::conv_options)
  float* conv_scratch = nullptr;
  double* norm_scratch = nullptr;   // batch_norm_scratch_doubles
  float* running_invstd = nullptr;  // eval batch norm: C floats
  int n = 0;                        // images in this batch
  bool training = false;
  float* temp[2] = {nullptr, nullptr};  // gradients inside a block (N, largest activation)

  const Parameter& param(const Layer& l, int k) const { return table[l.first_parameter + k]; }
  template <class Fn>
  void timed(const std::string& name, Phase phase, Fn&& fn) const {
    if (!observer) {
      fn();
      return;
    }
    const double t0 = omp_get_wtime();
    fn();
    observer->on_layer(name, phase, t0, omp_get_wtime());
  }
  void ready(const Layer& l) const {
    if (on_ready && *on_ready) (*on_ready)(param(l, entry::kWeight).offset);
  }
  int64_t rows(const ImageShape& s) const { return int64_t(n) * s.H * s.W; }
};

// Layer l's output as the bf16 values it holds when l.bf16_output.
uint16_t* bf16_output(const Layer& l) {
  return l.bf16_output ? reinterpret_cast<uint16_t*>(l.output) : nullptr;
}
// Layer l's input as bf16 (the layer before it wrote it so), or null.
const uint16_t* bf16_input(const Layer& l) {
  return l.bf16_input ? reinterpret_cast<const uint16_t*>(l.input) : nullptr;
}

void batch_norm_forward(const Pass& s, const Layer& l, const float* residual,
                        const uint16_t* residual_bf16) {
  layers::BatchNormOptions o;
  // a residual add is always followed by ReLU
  o.fuse_relu = l.relu || residual != nullptr || residual_bf16 != nullptr;
  o.residual = residual;
  o.residual_bf16 = residual_bf16;
  o.in_bf16 = bf16_input(l);
  o.reducer = s.reducer;
  o.out_bf16 = bf16_output(l);
  const int C = l.out.C;
  if (s.training) {
    layers::batch_norm_forward_training(
        l.output, l.batch_mean, l.batch_invstd, s.param(l, entry::kRunningMean).value,
        s.param(l, entry::kRunningVar).value, l.input, s.param(l, entry::kWeight).value,
        s.param(l, entry::kBias).value, s.rows(l.in), C, o, s.norm_scratch);
    s.param(l, entry::kBatchesTracked).value[0] += 1.0f;
  } else {
    layers::batch_norm_forward_inference(
        l.output, l.input, s.param(l, entry::kWeight).value, s.param(l, entry::kBias).value,
        s.param(l, entry::kRunningMean).value, s.param(l, entry::kRunningVar).value, s.rows(l.in),
        C, o, s.running_invstd);
  }
}

// l.output = layer(l.input); a batch norm adds `residual` or `residual_bf16` (then ReLU) when
// given.
void forward_layer(const Pass& s, const Layer& l, const float* residual = nullptr,
                   const uint16_t* residual_bf16 = nullptr) {
  s.timed(l.name, Phase::kForward, [&] {
    switch (l.kind) {
      case LayerKind::kConv:
      case LayerKind::kLinear: {
        kernels::ConvCall c;
        c.N = s.n;
        c.in_bf16 = bf16_input(l);
        c.in = c.in_bf16 ? nullptr : l.input;
        c.weight = s.param(l, entry::kWeight).value;
        c.out_bf16 = bf16_output(l);
        c.out = c.out_bf16 ? nullptr : l.output;
        c.scratch = s.conv_scratch;
        l.kernel[int(kernels::ConvPass::kForward)]->run(c);
        if (l.kind == LayerKind::kLinear)
          layers::linear_add_bias(l.output, s.param(l, entry::kBias).value, s.n, l.out.C);
        break;
      }
      case LayerKind::kBatchNorm:
        batch_norm_forward(s, l, residual, residual_bf16);
        break;
      case LayerKind::kMaxPool: {
        layers::PoolGeometry g = l.pool;
        g.N = s.n;
        if (l.bf16_output)  // a stem's, on its batch norm's bf16 output (link_bf16_block_outputs)
          layers::max_pool_forward(bf16_output(l), l.winners, bf16_input(l), g);
        else
          layers::max_pool_forward(l.output, l.winners, l.input, g);
        break;
      }
      case LayerKind::kGlobalAvgPool:
        layers::global_avg_pool_forward(l.output, l.input, s.n, l.in.H * l.in.W, l.in.C);
        break;
    }
  });
}

void conv_backward(const Pass& s, const Layer& l, float* d_input, const float* d_output,
                   bool accumulate, kernels::DInFinisher* finish_d_input) {
  // The weight gradient first: it is ready for the allreduce before the data gradient runs.
  // A bf16 output gradient (the batch norm after the conv wrote it in the fp32 buffer's place).
  const uint16_t* d_output_bf16 =
      l.bf16_gradient ? reinterpret_cast<const uint16_t*>(d_output) : nullptr;
  if (d_output_bf16) d_output = nullptr;
  s.timed(l.name, Phase::kBackwardWeights, [&] {
    kernels::ConvCall c;
    c.N = s.n;
    c.in_bf16 = bf16_input(l);
    c.in = c.in_bf16 ? nullptr : l.input;
    c.d_out = d_output;
    c.d_out_bf16 = d_output_bf16;
    c.d_weight = s.param(l, entry::kWeight).grad;
    c.scratch = s.conv_scratch;
    l.kernel[int(kernels::ConvPass::kBackwardWeights)]->run(c);
    if (l.kind == LayerKind::kLinear)
      layers::linear_bias_gradient(s.param(l, entry::kBias).grad, d_output, s.n, l.out.C);
  });
  s.ready(l);
  if (!l.input_gradient) return;
  s.timed(l.name, Phase::kBackward, [&] {
    kernels::ConvCall c;
    c.N = s.n;
    c.d_out = d_output;
    c.d_out_bf16 = d_output_bf16;
    c.weight = s.param(l, entry::kWeight).value;
    c.d_in = d_input;
    c.accumulate_d_in = accumulate;
    c.finish_d_in = finish_d_input;
    c.scratch = s.conv_scratch;
    kernels::run_and_finish_d_in(*l.kernel[int(kernels::ConvPass::kBackwardData)], c);
  });
}

// d_input = the gradient of l's input from d_output (+= with accumulate: convs only), then
// finished by finish_d_input where given (convs only). A batch norm may work in place (d_input ==
// d_output); the other kinds may not.
void backward_layer(const Pass& s, const Layer& l, float* d_input, float* d_output, bool accumulate,
                    kernels::DInFinisher* finish_d_input = nullptr) {
  NOSTRUM_CHECK((!accumulate && !finish_d_input) || l.kind == LayerKind::kConv, ShapeError,
                "only a conv can add its input gradient onto another", "layer " + l.name);
  if (runs_conv_kernels(l))
    return conv_backward(s, l, d_input, d_output, accumulate, finish_d_input);
  s.timed(l.name, Phase::kBackward, [&] {
    switch (l.kind) {
      case LayerKind::kBatchNorm: {
        layers::BatchNormOptions o;
        o.fuse_relu = l.relu;
        o.reducer = s.reducer;
        if (l.bf16_gradient) o.d_in_bf16 = reinterpret_cast<uint16_t*>(d_input);
        o.first_pass_sums = l.backward_sums;  // written by its block's add + ReLU backward
        o.out_bf16 = bf16_output(l);          // its ReLU mask
        o.in_bf16 = bf16_input(l);            // the conv's output, kept in bf16
        layers::batch_norm_backward(d_input, s.param(l, entry::kWeight).grad,
                                    s.param(l, entry::kBias).grad, d_output, l.input, l.output,
                                    s.param(l, entry::kWeight).value, l.batch_mean, l.batch_invstd,
                                    s.rows(l.in), l.in.C, o, s.norm_scratch);
        break;
      }
      case LayerKind::kMaxPool: {
        layers::PoolGeometry g = l.pool;
        g.N = s.n;
        layers::max_pool_backward(d_input, d_output, l.winners, g);
        break;
      }
      case LayerKind::kGlobalAvgPool:
        layers::global_avg_pool_backward(d_input, d_output, s.n, l.in.H * l.in.W, l.in.C);
        break;
      case LayerKind::kLinear:
      case LayerKind::kConv:
        break;
    }
  });
  if (l.kind == LayerKind::kBatchNorm) s.ready(l);
}

// Backward through a chain of layers, last first: d_chain_output is the gradient of its output
// (left unchanged unless it is one of the pass's temps); the first layer writes d_chain_input (or
// adds onto it with accumulate), then finish_d_input finishes it where given. Gradients in between
// alternate between the two temps; a batch norm works in place on a temp.
void backward_chain(const Pass& s, const std::vector<Layer>& chain, float* d_chain_input,
                    bool accumulate, float* d_chain_output,
                    kernels::DInFinisher* finish_d_input = nullptr) {
  float* d_output = d_chain_output;
  for (size_t i = chain.size(); i-- > 1;) {
    const Layer& l = chain[i];
    // In place on a temp, except for a batch norm writing its conv's gradient in bf16.
    const bool in_temp = d_output == s.temp[0] || d_output == s.temp[1];
    float* d_input = (l.kind == LayerKind::kBatchNorm && in_temp && !l.bf16_gradient) ? d_output
                     : (d_output == s.temp[0])                                        ? s.temp[1]
                                                                                      : s.temp[0];
    backward_layer(s, l, d_input, d_output, false);
    d_output = d_input;
  }
  backward_layer(s, chain.front(), d_chain_input, d_output, accumulate, finish_d_input);
}

void forward_block(const Pass& s, const Block& b) {
  if (!b.residual) {
    for (const Layer& l : b.path) forward_layer(s, l);
    return;
  }
  // The shortcut first, so that the path's last BN adds it and applies the ReLU in its own pass:
  // out = relu(bn(conv(...)) + shortcut), bit-identical to BN, then add + ReLU.
  // The shortcut in bf16 where it was kept so: the previous block's output (an identity) or the
  // downsample's batch norm output.
  for (const Layer& l : b.shortcut) forward_layer(s, l);
  const uint16_t* shortcut_bf16 =
      b.shortcut.empty() ? bf16_input(b.path.front()) : bf16_output(b.shortcut.back());
  const float* shortcut = shortcut_bf16        ? nullptr
                          : b.shortcut.empty() ? b.input()
                                               : b.shortcut.back().output;
  for (size_t i = 0; i + 1 < b.path.size(); ++i) forward_layer(s, b.path[i]);
  forward_layer(s, b.path.back(), shortcut, shortcut_bf16);
}

// fn(layer) for each of a residual block's batch norms whose first backward pass its add + ReLU
// backward runs: the path's last and the downsample's, where they are batch norms without a ReLU
// of their own (they read the add's gradient as it is); none for a block without a residual add.
// B: Block or const Block.
template <class B, class Fn>
void for_each_residual_reader(B& b, Fn&& fn) {
  if (!b.residual) return;
  for (auto* l : {&b.path.back(), b.shortcut.empty() ? nullptr : &b.shortcut.back()})
    if (l && l->kind == LayerKind::kBatchNorm && !l->relu) fn(*l);
}

// The ReLU after residual block b's add, backward: d_residual_sum = d_block_output where the
// output is positive, in place. It is the gradient of both addends: the shortcut's output and the
// path's. The same pass runs the first backward pass of the batch norms that read it (the path's
// last, a downsample's), which then skip theirs. Built in place (the finisher keeps pointers into
// the norms' requests).
class BlockAddBackward {
 public:
  BlockAddBackward(const Pass& s, const Block& b) {
    for_each_residual_reader(b, [&](const Layer& l) {
      layers::NormSumsRequest& r = norms_[norm_count_++];
      r.in_bf16 = bf16_input(l);
      r.in = r.in_bf16 ? nullptr : l.input;
      r.save_mean = l.batch_mean;
      r.sums = l.backward_sums;
    });
    const uint16_t* out_bf16 = bf16_output(b.path.back());
    rows_.emplace(b.d_block_output, out_bf16 ? nullptr : b.output(), out_bf16, s.rows(b.out()),
                  b.out().C, norms_, norm_count_);
  }
  BlockAddBackward(const BlockAddBackward&) = delete;
  BlockAddBackward& operator=(const BlockAddBackward&) = delete;
  // Finishes the block output gradient's rows as they become final (or all at once).
  layers::AddReluBackward& rows() { return *rows_; }

 private:
  layers::NormSumsRequest norms_[2];
  int norm_count_ = 0;
  std::optional<layers::AddReluBackward> rows_;
};

// Whether block b's first conv, whose data gradient is the last addend of b's input gradient,
// runs the add + ReLU backward of `before`, the block whose output b reads, on that gradient's rows
// as they are summed (a kernel that adds through a partial hands it over, so the add, the mask and
// the norms' sums are one pass; BlockAddBackward and layers::AddReluBackward).
bool first_conv_finishes_add(const Block& b, const Block& before) {
  const Layer& first = b.path.front();
  return b.residual && before.residual && first.kind == LayerKind::kConv && first.input_gradient &&
         b.d_block_input == before.d_block_output;
}

// Reverse state_dict order: the downsample branch before the path, so gradient-ready only drops.
// add_done: the next block's first conv ran this block's add + ReLU backward already;
// finish_add_of: the block before, whose add + ReLU backward this block's first conv runs
// (first_conv_finishes_add), or null.
void backward_block(const Pass& s, const Block& b, bool add_done, const Block* finish_add_of) {
  if (!b.residual) return backward_chain(s, b.path, b.d_block_input, false, b.d_block_output);
  std::optional<BlockAddBackward> before_add;
  if (finish_add_of) before_add.emplace(s, *finish_add_of);
  float* d_residual_sum = b.d_block_output;
  if (!add_done)
    s.timed(b.add_name, Phase::kBackward, [&] {
      BlockAddBackward add(s, b);
      add.rows().finish(nullptr, 0, add.rows().rows());
    });
  // The block input's gradient is the shortcut's plus the path's: the shortcut writes it (an
  // identity shortcut: d_block_input is d_residual_sum already), the path's first conv adds.
  if (!b.shortcut.empty()) backward_chain(s, b.shortcut, b.d_block_input, false, d_residual_sum);
  backward_chain(s, b.path, b.d_block_input, true, d_residual_sum,
                 before_add ? &before_add->rows() : nullptr);
}

// A stem that ends batch norm, max-pool (torchvision's ResNets): in a bf16 run the norm writes bf16
// and the max-pool picks among those values, so its output can be handed to the first block in
// bf16 as a residual block's can (link_bf16_block_outputs).
bool pooled_stem(const Block& b) {
  const std::vector<Layer>& p = b.path;
  return !b.residual && p.size() >= 2 && p.back().kind == LayerKind::kMaxPool &&
         p[p.size() - 2].kind == LayerKind::kBatchNorm;
}

// A stem that ends batch norm + ReLU (the CIFAR-style ResNets'): in a bf16 run the norm writes its
// output in bf16 as a residual block's last norm does, for the first block's convs and its identity
// shortcut's add (link_bf16_block_outputs).
bool normed_stem(const Block& b) {
  const std::vector<Layer>& p = b.path;
  return !b.residual && !p.empty() && p.back().kind == LayerKind::kBatchNorm && p.back().relu;
}

// Whether a bf16 run may keep block b's output in bf16: a residual block's, a stem's that ends
// max-pool or batch norm + ReLU.
bool bf16_capable_output(const Block& b) {
  return b.residual || pooled_stem(b) || normed_stem(b);
}

// A residual path's inner batch norm (followed by ReLU, not the path's last): its output is read
// by the next conv only (and its own backward's mask).
bool inner_norm(const Block& b, const std::vector<Layer>& chain, const Layer& l) {
  return l.kind == LayerKind::kBatchNorm && b.residual && &chain == &b.path && l.relu &&
         !l.last_of_residual_path;
}

// Whether conv's forward and weight-gradient kernels (as set) take their input in bf16.
bool takes_bf16_input(const Layer& conv) {
  const kernels::PreparedConv* fwd = conv.kernel[int(kernels::ConvPass::kForward)].get();
  const kernels::PreparedConv* wgt = conv.kernel[int(kernels::ConvPass::kBackwardWeights)].get();
  return fwd && wgt && fwd->takes_bf16_in() && wgt->takes_bf16_in();
}

// A block's path and shortcut both read the block input: the previous block's output (the first
// block's: the images, set by forward).
void set_block_input(Block& b, const float* input) {
  b.path.front().input = input;
  if (!b.shortcut.empty()) b.shortcut.front().input = input;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------------------

struct Model::Impl {
  std::vector<Block> blocks;  // the table
  std::vector<double> norm_scratch;
  std::vector<double> norm_sums;  // two slots of Layer::backward_sums
  std::vector<int32_t> winners;   // every max-pool's winner indices
  float* conv_scratch = nullptr;
  float* running_invstd = nullptr;  // eval batch norm (largest C)
  float* d_logits = nullptr;        // (N, classes), written by loss
  float* gradient_buffers[4] = {};  // (N, largest activation) each: two boundaries, two temps
  // The options every conv pass starts from (and that size the conv scratch): the defaults and
  // the model's precision (bf16: kernels/bf16.hpp; the classifier takes the same precision).
  layers::ConvOptions conv_options;
  kernels::ConvChoiceTable conv_kernels;  // what set_conv_kernels was given
  bool bf16_handover = true;              // set_bf16_handover
  bool bf16_block_outputs = true;         // set_bf16_block_outputs
  bool bf16_conv_outputs = true;          // set_bf16_conv_outputs
  // Sets Layer::bf16_gradient on every conv and the batch norm after it, and bf16_output /
  // bf16_input on a residual path's inner batch norms and the convs after them (see there); then
  // link_bf16_block_outputs and link_bf16_conv_outputs.
  void link_bf16_handover(kernels::Precision precision);
  // Sets bf16_output on each residual block's last batch norm whose output the next residual
  // block reads in bf16 (its first conv and downsample conv take bf16 inputs; an identity
  // shortcut's add reads it so), and bf16_input on those convs; and on every downsample's batch
  // norm (the add its only reader).
  void link_bf16_block_outputs(kernels::Precision precision);
  // Sets bf16_output on each conv whose forward kernel writes bf16 (writes_bf16_out) and that a
  // batch norm follows, and bf16_input on that batch norm.
  void link_bf16_conv_outputs(kernels::Precision precision);
  const Layer& last() const { return blocks.back().path.back(); }
  Pass pass(Model& m, int n, bool training) {
    Pass s(m.table_);
    s.reducer = m.reducer_;
    s.observer = m.observer_;
    s.conv_options = conv_options;
    s.conv_scratch = conv_scratch;
    s.norm_scratch = norm_scratch.data();
    s.running_invstd = running_invstd;
    s.n = n;
    s.training = training;
    s.temp[0] = gradient_buffers[2];
    s.temp[1] = gradient_buffers[3];
    return s;
  }
  void allocate_activations(Model& m, int max_batch);
  void link_tensors();
};

std::unique_ptr<Model> Model::create(const ModelConfig& config) {
  return std::make_unique<Model>(resnet_spec(config));
}

Model::Model(const ResNetSpec& spec) : spec_(spec), impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

// Every activation tensor from one arena (counted in a first walk, taken in a second), in table
// order, and the scratch sized for the largest conv and batch norm.
void Model::Impl::allocate_activations(Model& m, int max_batch) {
  const size_t N = static_cast<size_t>(max_batch);
  int64_t largest = 0;  // floats per image of any activation (the gradient buffers' size)
  int max_channels = 0;
  size_t conv_floats = 0, norm_doubles = 0, sums_doubles = 0, winner_count = 0;
  for_each_layer(blocks, [&](Layer& l) {
    largest = std::max({largest, l.in.floats(), l.out.floats()});
    max_channels = std::max(max_channels, l.out.C);
    if (runs_conv_kernels(l)) {
      l.conv.N = max_batch;
      conv_floats = std::max(conv_floats, layers::conv2d_scratch_floats(l.conv, conv_options));
    }
    if (l.kind == LayerKind::kBatchNorm) {
      norm_doubles = std::max(norm_doubles, layers::batch_norm_scratch_doubles(l.out.C));
      sums_doubles = std::max(sums_doubles, layers::batch_norm_backward_sums_doubles(l.out.C));
    }
    if (l.kind == LayerKind::kMaxPool) {
      l.pool.N = max_batch;
      winner_count += N * l.out.floats();
    }
  });
  auto walk = [&](auto&& take) {
    for_each_layer(blocks, [&](Layer& l) {
      l.output = take(N * l.out.floats());
      if (l.kind == LayerKind::kBatchNorm) {
        l.batch_mean = take(l.out.C);
        l.batch_invstd = take(l.out.C);
      }
    });
    running_invstd = take(max_channels);
    d_logits = take(N * last().out.C);
    for (float*& g : gradient_buffers) g = take(N * largest);
  };
  size_t activation_floats = 0;
  walk([&](size_t count) -> float* {
    activation_floats += Arena::padded(count);
    return nullptr;
  });
  // Fresh pages, committed where written: a bf16 run's handed-over activations fill half of
  // their fp32 slots, and the halves never written take no memory.
  m.activations_ =
      Arena(activation_floats, m.spec_.name + " activations", Arena::Zeroing::kOnFirstTouch);
  walk([&](size_t count) { return m.activations_.take(count, "activations"); });
  m.scratch_ = Arena(conv_floats, m.spec_.name + " conv scratch");
  conv_scratch = m.scratch_.data();
  norm_scratch.assign(norm_doubles, 0.0);
  norm_sums.assign(2 * sums_doubles, 0.0);
  for (Block& b : blocks) {
    size_t slot = 0;
    for_each_residual_reader(
        b, [&](Layer& l) { l.backward_sums = norm_sums.data() + sums_doubles * slot++; });
  }
  winners.assign(winner_count, 0);
  int32_t* w = winners.data();
  for_each_layer(blocks, [&](Layer& l) {
    if (l.kind != LayerKind::kMaxPool) return;
    l.winners = w;
    w += N * l.out.floats();
  });
}

// Each layer reads the previous one's output; then the gradient buffers of every block.
void Model::Impl::link_tensors() {
  const float* x = nullptr;
  for (Block& b : blocks) {
    set_block_input(b, x);
    for (auto* chain : {&b.path, &b.shortcut})
      for (size_t i = 1; i < chain->size(); ++i) (*chain)[i].input = (*chain)[i - 1].output;
    x = b.output();
  }
  // Gradients, last block first: each block's output gradient is the next block's input
  // gradient; block boundaries alternate between two buffers, except that an identity shortcut
  // keeps its block's (the path adds onto it).
  float* d_block_output = d_logits;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& b = *it;
    b.d_block_output = d_block_output;
    if (&b == &blocks.front())
      b.d_block_input = nullptr;  // the images
    else if (b.residual && b.shortcut.empty())
      b.d_block_input = d_block_output;
    else
      b.d_block_input =
          d_block_output == gradient_buffers[0] ? gradient_buffers[1] : gradient_buffers[0];
    d_block_output = b.d_block_input;
  }
}

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
  m.blocks = resnet_blocks(spec_, ImageShape{height, width, spec_.in_channels});
  for_each_layer(m.blocks, [&](const Layer& l) {
    if (l.kind != LayerKind::kConv) return;
    NOSTRUM_CHECK(
        l.in.H + 2 * l.conv.pad >= l.conv.R && l.in.W + 2 * l.conv.pad >= l.conv.S, ShapeError,
        "image " + std::to_string(height) + "x" + std::to_string(width) + " is too small: " +
            l.name + " gets " + std::to_string(l.in.H) + "x" + std::to_string(l.in.W),
        "model " + spec_.name, "use a larger image size");
  });

  // ---- the parameter table, then its arenas: one contiguous run each, state_dict order ----
  training_flops_per_image_ = 0.0;
  for_each_layer(m.blocks, [&](Layer& l) {
    l.first_parameter = table_.size();
    for (const ParameterSpec& spec : parameter_specs(l)) {
      Parameter p;
      p.name = l.name + spec.suffix;
      p.shape = spec.shape;
      p.kind = spec.kind;
      table_.push_back(p);
    }
    // forward, backward-data (none into the images), backward-weights
    training_flops_per_image_ += forward_flops_per_image(l) * (l.input_gradient ? 3.0 : 2.0);
  });
  for (auto& p : table_) {
    size_t& count = p.trainable() ? parameter_count_ : buffer_count_;
    p.offset = count;
    count += static_cast<size_t>(p.numel());
  }
  params_ = Arena(parameter_count_, spec_.name + " parameters");
  grads_ = Arena(parameter_count_, spec_.name + " gradients");
  buffers_ = Arena(buffer_count_, spec_.name + " buffers");
  for (auto& p : table_) {
    p.value = (p.trainable() ? params_.data() : buffers_.data()) + p.offset;
    if (p.trainable()) p.grad = grads_.data() + p.offset;
  }
  m.conv_options.precision = spec_.precision;
  m.allocate_activations(*this, max_batch);
  m.link_tensors();
  kernels::ConvChoiceTable fixed;  // empty: every pass by the fixed rule
  fixed.precision = spec_.precision;
  fixed.threads = omp_get_max_threads();
  set_conv_kernels(fixed);
}

std::vector<kernels::ConvPassShape> Model::conv_pass_shapes() const {
  NOSTRUM_CHECK(!impl_->blocks.empty(), ShapeError, "conv shapes before build",
                "model " + spec_.name);
  // Which operands a bf16 run hands a conv in bf16 where its kernel takes them (link_bf16_handover,
  // link_bf16_block_outputs): the output gradient from the batch norm after it, the input from an
  // inner batch norm before it or from the previous residual block's output. A shape holds them
  // only if every layer of it does.
  const Impl& m = *impl_;
  const bool bf16 = spec_.precision == kernels::Precision::kBf16;
  std::vector<kernels::ConvPassShape> shapes;
  for (size_t bi = 0; bi < m.blocks.size(); ++bi) {
    const Block& b = m.blocks[bi];
    const bool after_residual = b.residual && bi > 0 && bf16_capable_output(m.blocks[bi - 1]);
    for (const std::vector<Layer>* chain : {&b.path, &b.shortcut})
      for (size_t i = 0; i < chain->size(); ++i) {
        const Layer& l = (*chain)[i];
        if (!runs_conv_kernels(l)) continue;
        const Layer* prev = i > 0 ? &(*chain)[i - 1] : nullptr;
        const Layer* next = i + 1 < chain->size() ? &(*chain)[i + 1] : nullptr;
        const bool conv = l.kind == LayerKind::kConv;
        const bool inner_norm_before = prev && inner_norm(b, *chain, *prev);
        const bool d_out =
            bf16 && conv && m.bf16_handover && next && next->kind == LayerKind::kBatchNorm;
        const bool in = bf16 && conv &&
                        ((m.bf16_handover && inner_norm_before) ||
                         (m.bf16_block_outputs && i == 0 && after_residual));
        const bool out =
            bf16 && conv && m.bf16_conv_outputs && next && next->kind == LayerKind::kBatchNorm;
        for (kernels::ConvPass pass : kernels::kConvPasses) {
          if (pass == kernels::ConvPass::kBackwardData && !l.input_gradient) continue;
          // A residual path's first conv adds its input gradient onto the shortcut's.
          const bool accumulate =
              pass == kernels::ConvPass::kBackwardData && b.residual && chain == &b.path && i == 0;
          const kernels::ConvPassShape shape{
              l.conv, pass, in, d_out, out && pass == kernels::ConvPass::kForward, accumulate};
          bool seen = false;
          for (auto& s : shapes)
            if (kernels::same_shape(s, shape)) {
              seen = true;
              s.bf16_in = s.bf16_in && in;
              s.bf16_d_out = s.bf16_d_out && d_out;
              s.bf16_out = s.bf16_out && shape.bf16_out;
              // Measured accumulating where any layer of the shape accumulates.
              s.accumulate_d_in = s.accumulate_d_in || accumulate;
            }
          if (!seen) shapes.push_back(shape);
        }
      }
  }
  return shapes;
}

void Model::set_conv_kernels(const kernels::ConvChoiceTable& table) {
  NOSTRUM_CHECK(!impl_->blocks.empty(), ShapeError, "conv kernels before build",
                "model " + spec_.name);
  NOSTRUM_CHECK(table.precision == spec_.precision, ShapeError,
                std::string("conv kernel table for ") + kernels::precision_name(table.precision) +
                    ", the model computes in " + kernels::precision_name(spec_.precision),
                "model " + spec_.name);
  Impl& m = *impl_;
  std::vector<std::pair<kernels::ConvPassShape, std::shared_ptr<kernels::PreparedConv>>> prepared;
  size_t scratch_floats = 0;
  for_each_layer(m.blocks, [&](Layer& l) {
    if (!runs_conv_kernels(l)) return;
    for (kernels::ConvPass pass : kernels::kConvPasses) {
      std::shared_ptr<kernels::PreparedConv>& kernel = l.kernel[int(pass)];
      kernel.reset();
      if (pass == kernels::ConvPass::kBackwardData && !l.input_gradient) continue;
      const kernels::ConvPassShape shape{l.conv, pass};
      for (const auto& [s, k] : prepared)
        if (kernels::same_shape(s, shape)) kernel = k;
      if (kernel) continue;
      const kernels::ConvChoice* row = table.find(shape);
      const kernels::ConvCandidate* c =
          row ? kernels::find_conv_candidate(row->chosen)
              : &kernels::conv_fixed_rule_candidate(l.conv, pass, spec_.precision, table.threads);
      NOSTRUM_CHECK(
          c && kernels::conv_candidate_eligible(*c, l.conv, pass, spec_.precision), ShapeError,
          "conv kernel '" + (row ? row->chosen : std::string("?")) + "' cannot run " +
              kernels::conv_shape_name(l.conv) + " " + kernels::conv_pass_name(pass) + " here",
          "layer " + l.name);
      kernel = kernels::prepare_conv_candidate(*c, l.conv, pass, spec_.precision);
      scratch_floats = std::max(scratch_floats, kernel->scratch_floats());
      prepared.emplace_back(shape, kernel);
    }
  });
  if (scratch_floats > scratch_.capacity()) {
    scratch_ = Arena(scratch_floats, spec_.name + " conv scratch");
    m.conv_scratch = scratch_.data();
  }
  m.conv_kernels = table;
  m.link_bf16_handover(spec_.precision);
}

void Model::Impl::link_bf16_handover(kernels::Precision precision) {
  const bool bf16 = bf16_handover && precision == kernels::Precision::kBf16;
  const auto kernel = [](const Layer& l, kernels::ConvPass pass) {
    return l.kernel[int(pass)].get();
  };
  const auto takes_d_out = [&](const Layer& l, kernels::ConvPass pass) {
    const kernels::PreparedConv* k = kernel(l, pass);
    return !k || k->takes_bf16_d_out();  // no kernel: the stem has no backward-data pass
  };
  for (Block& b : blocks)
    for (std::vector<Layer>* chain : {&b.path, &b.shortcut})
      for (size_t i = 0; i < chain->size(); ++i) {
        Layer& l = (*chain)[i];
        Layer* next = i + 1 < chain->size() ? &(*chain)[i + 1] : nullptr;
        if (l.kind == LayerKind::kConv) {
          Layer* norm = next && next->kind == LayerKind::kBatchNorm ? next : nullptr;
          const bool on = bf16 && norm && kernel(l, kernels::ConvPass::kBackwardWeights) &&
                          takes_d_out(l, kernels::ConvPass::kBackwardWeights) &&
                          takes_d_out(l, kernels::ConvPass::kBackwardData);
          l.bf16_gradient = on;
          if (norm) norm->bf16_gradient = on;
        }
        if (l.kind == LayerKind::kBatchNorm) {
          // Its output is only the next conv's input (and its own backward's ReLU mask). A
          // block's last one is the block output (link_bf16_block_outputs).
          const bool on = bf16 && inner_norm(b, *chain, l) && next &&
                          next->kind == LayerKind::kConv && takes_bf16_input(*next);
          l.bf16_output = on;
          if (next) next->bf16_input = on;
        }
      }
  link_bf16_block_outputs(precision);
  link_bf16_conv_outputs(precision);
}

void Model::Impl::link_bf16_conv_outputs(kernels::Precision precision) {
  const bool bf16 = bf16_conv_outputs && precision == kernels::Precision::kBf16;
  for (Block& b : blocks)
    for (std::vector<Layer>* chain : {&b.path, &b.shortcut})
      for (size_t i = 0; i < chain->size(); ++i) {
        Layer& l = (*chain)[i];
        Layer* next = i + 1 < chain->size() ? &(*chain)[i + 1] : nullptr;
        if (l.kind != LayerKind::kConv) continue;
        const kernels::PreparedConv* fwd = l.kernel[int(kernels::ConvPass::kForward)].get();
        const bool on =
            bf16 && next && next->kind == LayerKind::kBatchNorm && fwd && fwd->writes_bf16_out();
        l.bf16_output = on;
        if (next && next->kind == LayerKind::kBatchNorm) next->bf16_input = on;
      }
}

void Model::Impl::link_bf16_block_outputs(kernels::Precision precision) {
  const bool bf16 = bf16_block_outputs && precision == kernels::Precision::kBf16;
  for (size_t i = 0; i < blocks.size(); ++i) {
    Block& b = blocks[i];
    Block* next = i + 1 < blocks.size() && blocks[i + 1].residual ? &blocks[i + 1] : nullptr;
    const bool on = bf16 && bf16_capable_output(b) && next &&
                    takes_bf16_input(next->path.front()) &&
                    (next->shortcut.empty() || takes_bf16_input(next->shortcut.front()));
    if (b.residual || normed_stem(b)) b.path.back().bf16_output = on;
    if (pooled_stem(b)) {  // the norm writes bf16, the max-pool reads and writes it
      Layer& pool = b.path.back();
      Layer& norm = b.path[b.path.size() - 2];
      norm.bf16_output = pool.bf16_input = pool.bf16_output = on;
    }
    // A downsample's batch norm: its output is read only by the add.
    if (!b.shortcut.empty()) b.shortcut.back().bf16_output = bf16;
    if (i + 1 < blocks.size()) {
      Block& n = blocks[i + 1];
      n.path.front().bf16_input = on;
      if (!n.shortcut.empty()) n.shortcut.front().bf16_input = on;
    }
  }
}

void Model::set_bf16_handover(bool on) {
  impl_->bf16_handover = on;
  impl_->link_bf16_handover(spec_.precision);
}

void Model::set_bf16_block_outputs(bool on) {
  impl_->bf16_block_outputs = on;
  impl_->link_bf16_block_outputs(spec_.precision);
}

void Model::set_bf16_conv_outputs(bool on) {
  impl_->bf16_conv_outputs = on;
  impl_->link_bf16_conv_outputs(spec_.precision);
}

int Model::bf16_conv_outputs() const {
  int count = 0;
  for_each_layer(impl_->blocks,
                 [&](const Layer& l) { count += l.kind == LayerKind::kConv && l.bf16_output; });
  return count;
}

int Model::bf16_block_outputs() const {
  int count = 0;
  for (const Block& b : impl_->blocks) count += bf16_capable_output(b) && b.path.back().bf16_output;
  return count;
}

int Model::bf16_gradient_convs() const {
  int count = 0;
  for_each_layer(impl_->blocks,
                 [&](const Layer& l) { count += l.kind == LayerKind::kConv && l.bf16_gradient; });
  return count;
}

int Model::bf16_input_convs() const {
  int count = 0;
  for_each_layer(impl_->blocks,
                 [&](const Layer& l) { count += l.kind == LayerKind::kConv && l.bf16_input; });
  return count;
}

const kernels::ConvChoiceTable& Model::conv_kernels() const {
  return impl_->conv_kernels;
}

double Model::layer_flops_per_image(const std::string& layer) const {
  double flops = 0.0;
  for_each_layer(impl_->blocks, [&](const Layer& l) {
    if (l.name == layer) flops = forward_flops_per_image(l);
  });
  return flops;
}

const Parameter& Model::parameter(const std::string& name) const {
  for (const auto& p : table_)
    if (p.name == name) return p;
  throw ShapeError("no parameter or buffer named '" + name + "'", "model " + spec_.name);
}

size_t Model::activation_bytes() const {
  return (activations_.capacity() + scratch_.capacity()) * sizeof(float) +
         (impl_->norm_scratch.size() + impl_->norm_sums.size()) * sizeof(double) +
         impl_->winners.size() * sizeof(int32_t);
}

void Model::set_norm_reducer(Reducer* reducer) {
  reducer_ = reducer;
}
void Model::set_observer(LayerObserver* observer) {
  observer_ = observer;
}

void Model::init(uint64_t seed) {
  NOSTRUM_CHECK(!table_.empty(), ShapeError, "init before build", "model " + spec_.name);
  for_each_layer(impl_->blocks,
                 [&](const Layer& l) { init_layer(l, table_, seed, spec_.zero_init_residual); });
}

const float* Model::forward(const float* images, int n, bool training) {
  NOSTRUM_CHECK(!table_.empty(), ShapeError, "forward before build", "model " + spec_.name);
  NOSTRUM_CHECK(
      n >= 1 && n <= max_batch_, ShapeError,
      "batch of " + std::to_string(n) + " images, built for 1.." + std::to_string(max_batch_),
      "model " + spec_.name);
  Impl& m = *impl_;
  set_block_input(m.blocks.front(), images);  // the first conv's weight gradient reads them too
  batch_ = n;
  last_training_ = training;
  have_loss_ = false;
  const Pass s = m.pass(*this, n, training);
  for (const Block& b : m.blocks) forward_block(s, b);
  return m.last().output;
}

double Model::loss(const int32_t* labels, float label_smoothing, float grad_scale) {
  NOSTRUM_CHECK(batch_ > 0, ShapeError, "loss before forward", "model " + spec_.name);
  have_loss_ = true;
  return layers::softmax_cross_entropy(impl_->d_logits, impl_->last().output, labels, batch_,
                                       spec_.num_classes, label_smoothing, grad_scale);
}

int Model::count_correct(const int32_t* labels) const {
  return layers::count_top1_correct(impl_->last().output, labels, batch_, spec_.num_classes);
}

void Model::backward(const GradientReadyCallback& on_ready) {
  NOSTRUM_CHECK(last_training_ && have_loss_, ShapeError,
                "backward needs a training forward and a loss first", "model " + spec_.name);
  Impl& m = *impl_;
  Pass s = m.pass(*this, batch_, true);
  s.on_ready = &on_ready;
  bool add_done = false;  // by the block after, on the previous iteration
  for (size_t i = m.blocks.size(); i-- > 0;) {
    const Block* finish_add_of =
        i > 0 && first_conv_finishes_add(m.blocks[i], m.blocks[i - 1]) ? &m.blocks[i - 1] : nullptr;
    backward_block(s, m.blocks[i], add_done, finish_add_of);
    add_done = finish_add_of != nullptr;
  }
}

}  // namespace nostrum::model
