// Model: a ResNet built once for a maximum batch and image size, owning every arena it needs
// (parameters, gradients, buffers, activations, scratch), laid out from one table of blocks and
// layers (src/model/model.cpp). forward/loss/backward take no memory of their own beyond those
// arenas, except per-thread buffers that grow on the first call of a larger shape and are reused
// after: the direct conv kernels' (kernels/direct_conv.hpp: one padded image and one
// weight-gradient partial per thread) and, with bf16 precision, the mixed-precision GEMM's
// (kernels/bf16.hpp: the A operand rounded to bf16 words, and B for the classifier's gemm_bf16).
// From the second step on nothing allocates.
// Images are NHWC float (N,H,W,C); parameters are in PyTorch layout, named by torchvision's
// state_dict keys, laid out in state_dict (forward) order in one parameter and one gradient arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/parameter.hpp"
#include "nostrum/core/reducer.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "nostrum/model/architecture.hpp"

namespace nostrum::model {

// kBackward: a layer's input gradient (and, except for convs, its parameters' gradients);
// kBackwardWeights: a conv's weight gradient, timed apart so that a profile shows both halves.
enum class Phase { kForward, kBackward, kBackwardWeights };

// Per-layer timing hook (benchmark --layers, driver --trace). Times are omp_get_wtime() seconds.
// When none is set the model reads no clock at all.
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  virtual void on_layer(const std::string& layer, Phase phase, double start_s, double end_s) = 0;
};

// Called during backward after each layer with parameters: every gradient at offsets >= ready_from
// in the gradient arena is final. ready_from only decreases during one backward.
using GradientReadyCallback = std::function<void(size_t ready_from)>;

class Model {
 public:
  // Factory by name; throws OptionError listing the valid names for an unknown one.
  static std::unique_ptr<Model> create(const ModelConfig& config);

  explicit Model(const ResNetSpec& spec);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Shape inference for (max_batch, H, W, in_channels) images; allocates every arena. Call once
  // before anything else (the parameter table exists only after build). ShapeError if too small.
  void build(int max_batch, int height, int width);
  // Torchvision's initialisation from a seed: conv Kaiming normal (fan_out, ReLU), BN gamma 1 (0
  // for the last BN of each block with zero_init_residual), beta 0, running mean 0, var 1, fc
  // PyTorch's default uniform(+-1/sqrt(fan_in)). Deterministic for any thread count.
  void init(uint64_t seed);

  // forward: images (n,H,W,C) with n <= max_batch -> logits (n, num_classes), valid until the next
  // forward. training = batch statistics (updating running ones) and keeping what backward needs.
  const float* forward(const float* images, int n, bool training);
  // Mean softmax cross-entropy (label smoothing) of the last forward's logits; stores d_logits =
  // grad_scale * (softmax - target) for backward. labels (n) with n of the last forward.
  double loss(const int32_t* labels, float label_smoothing, float grad_scale);
  // Top-1 correct count of the last forward's logits. labels (n).
  int count_correct(const int32_t* labels) const;
  // Gradients of the last training forward + loss into the gradient arena (overwritten, no need to
  // zero it). on_ready as described above (may be empty).
  void backward(const GradientReadyCallback& on_ready = {});

  // Every distinct conv pass (geometry at max_batch, pass) in table order; the stem has no
  // backward-data pass. What the conv kernel choice measures (kernels/conv_selection.hpp). In a
  // bf16 run each carries the operands the model hands over in bf16 to every layer of that shape
  // (ConvPassShape::bf16_in, bf16_d_out; by the hand-over switches as they are now); a
  // backward-data pass is accumulate_d_in where a layer of its shape adds onto the gradient there
  // (a residual path's first conv).
  std::vector<kernels::ConvPassShape> conv_pass_shapes() const;
  // Each conv pass runs the table's chosen candidate for its shape (the fixed rule where the table
  // has no row), prepared once per distinct shape and shared by the layers of that shape; the conv
  // scratch grows to what they need. build() sets the fixed rule everywhere. ShapeError when a
  // chosen candidate cannot run a shape here or the table's precision is not the model's.
  void set_conv_kernels(const kernels::ConvChoiceTable& table);
  const kernels::ConvChoiceTable& conv_kernels() const;  // the table last set
  // bf16 runs hand bf16 tensors from the batch norms to the convs that take them, written in bf16
  // once instead of rounded from fp32 by each pass: the same bf16 values, so the same results.
  // - Output gradients: a conv whose backward kernels both take one
  //   (PreparedConv::takes_bf16_d_out: nostrum's bf16 GEMM, oneDNN's bf16 primitives, an fp32
  //   kernel widening it: kernels::prepare_conv_candidate) gets it from the batch norm after it.
  //   bf16_gradient_convs() counts those convs.
  // - Activations: a residual path's inner batch norm (its output read only by the next conv and
  //   its own ReLU mask) keeps its output in bf16 where that conv's forward and weight-gradient
  //   kernels take it (takes_bf16_in). bf16_input_convs() counts those convs.
  // On by default; off for A/B checks.
  void set_bf16_handover(bool on);
  int bf16_gradient_convs() const;
  int bf16_input_convs() const;
  // bf16 runs also keep the residual stream in bf16, as PyTorch's autocast does: a residual
  // block's output (its last batch norm + add + ReLU) is written in bf16 where the next residual
  // block reads it only through kernels that take bf16 (its first conv's and downsample conv's
  // forward and weight-gradient kernels; an identity shortcut's add and the add's ReLU mask widen
  // it), and each downsample's batch norm output (the add's shortcut) in bf16. Unlike the
  // hand-over this changes the values: the convs read the same bf16 values as before, but the
  // residual adds and the add's mask read their operands rounded to bf16. A stem that ends
  // batch norm, max-pool hands its output over the same way: the norm writes bf16 and the
  // max-pool picks among those values (exact), where the first block's convs take bf16; so does a
  // stem that ends batch norm + ReLU (the CIFAR-style ResNets'), its norm writing bf16.
  // On by default; bf16_block_outputs() counts those blocks, the stem among them (the last
  // residual block feeds the head in fp32).
  void set_bf16_block_outputs(bool on);
  int bf16_block_outputs() const;
  // bf16 runs keep a conv's output in bf16, as PyTorch's autocast does, where its forward kernel
  // writes bf16 (PreparedConv::writes_bf16_out: oneDNN's bf16 primitive) and a batch norm reads
  // it: the batch norm's statistics, normalisation and backward read the rounded values. A
  // numerics change like the bf16 block outputs; on by default; bf16_conv_outputs() counts them.
  void set_bf16_conv_outputs(bool on);
  int bf16_conv_outputs() const;

  void set_norm_reducer(Reducer* reducer);     // sync-BN; nullptr = per-rank statistics
  void set_observer(LayerObserver* observer);  // nullptr = no timing

  const ResNetSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  int num_classes() const { return spec_.num_classes; }
  int max_batch() const { return max_batch_; }
  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return spec_.in_channels; }

  // Every parameter and buffer in state_dict order. Trainable entries point into the parameter and
  // gradient arenas at the same offset; buffers (running_mean, running_var, num_batches_tracked as
  // float) into the buffer arena.
  ParameterTable& parameters() { return table_; }
  const ParameterTable& parameters() const { return table_; }
  const Parameter& parameter(const std::string& name) const;  // ShapeError if no such name

  float* parameter_data() { return params_.data(); }
  float* gradient_data() { return grads_.data(); }
  size_t parameter_count() const { return parameter_count_; }  // = gradient count, exactly
  float* buffer_data() { return buffers_.data(); }
  size_t buffer_count() const { return buffer_count_; }
  // Activation + gradient + scratch arenas (not the direct conv kernels' per-thread buffers).
  size_t activation_bytes() const;
  // The activation arena (activations and their gradients), for another task to borrow while no
  // forward or backward runs, as the conv kernel measurement does before the first step
  // (kernels::ConvMeasureBuffers): zero after build, and the borrower leaves it zero.
  float* activation_memory() { return activations_.data(); }
  size_t activation_memory_floats() const { return activations_.capacity(); }
  // Multiply-adds x2 of one training step per image: conv/linear forward, backward-data (not for
  // the stem) and backward-weights. BN, pooling and elementwise work is not counted.
  double training_flops_per_image() const { return training_flops_per_image_; }
  // Forward multiply-adds x2 of one conv or the fc layer (by the name the observer sees) per image;
  // backward-data and backward-weights cost the same each. 0 for any other layer.
  double layer_flops_per_image(const std::string& layer) const;

  struct Impl;

 private:
  ResNetSpec spec_;
  int max_batch_ = 0, height_ = 0, width_ = 0, batch_ = 0;
  bool last_training_ = false, have_loss_ = false;
  ParameterTable table_;
  Arena params_, grads_, buffers_, activations_, scratch_;
  size_t parameter_count_ = 0, buffer_count_ = 0;
  double training_flops_per_image_ = 0.0;
  Reducer* reducer_ = nullptr;
  LayerObserver* observer_ = nullptr;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nostrum::model
