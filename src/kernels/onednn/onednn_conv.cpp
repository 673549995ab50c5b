// OnednnConv: one convolution pass as oneDNN 2.x primitives on nostrum's NHWC fp32 activations and
// (K, C, R, S) fp32 weights; the primitive's own weight layout (format "any") and every reorder in
// and out of it created once; their working memory (scratchpad in user mode) laid out in the
// caller's workspace.
#include "nostrum/kernels/onednn_conv.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/page_memory.hpp"
#include "parallel_add.hpp"

namespace nostrum::kernels {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
  }
  return "isa " + std::to_string(unsigned(isa));  // one newer than this list
}

// The process's CPU engine and stream (oneDNN's CPU stream runs each primitive to completion on
// the calling thread's OpenMP pool). The CPU table first: it may set DNNL_MAX_CPU_ISA.
dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    (void)cpu_features();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}
dnnl::stream& cpu_stream() {
  static dnnl::stream stream(cpu_engine());
  return stream;
}

// Backward-data accumulating adds its gradient into d_in through a buffer of at most this many
// bytes (a chunk of whole images; one image at least).
constexpr size_t kSumBudgetBytes = size_t(16) << 20;

std::string describe(const ConvGeometry& g) {
  return "oneDNN conv N=" + std::to_string(g.N) + " H=" + std::to_string(g.H) +
         " W=" + std::to_string(g.W) + " C=" + std::to_string(g.C) + " K=" + std::to_string(g.K) +
         " R=" + std::to_string(g.R) + " S=" + std::to_string(g.S) +
         " stride=" + std::to_string(g.stride) + " pad=" + std::to_string(g.pad);
}

// A block of bytes, owned: fresh pages, page-aligned, large ones on huge pages
// (core/page_memory.hpp).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes) pages_ = PageBuffer(bytes, "oneDNN conv buffer");
  }
  void* data() const { return pages_.data(); }
  size_t bytes() const { return bytes_; }

 private:
  PageBuffer pages_;
  size_t bytes_ = 0;
};

// A reorder between two layouts (or fp32 <-> bf16), its scratchpad in user mode.
struct Reorder {
  dnnl::reorder primitive;
  size_t scratch_bytes = 0;
};
Reorder make_reorder(const memory::desc& from, const memory::desc& to) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to, attr);
  return {dnnl::reorder(pd), pd.scratchpad_desc().get_size()};
}

}  // namespace

const OnednnLibrary& onednn_library() {
  static const OnednnLibrary library = [] {
    (void)cpu_engine();  // the CPU table, then oneDNN
    const dnnl_version_t* v = dnnl_version();
    OnednnLibrary l;
    l.version =
        std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    l.isa = isa_name(dnnl::get_effective_cpu_isa());
    return l;
  }();
  return library;
}

bool onednn_bf16_native() {
  (void)onednn_library();
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return cpu_features().avx512_bf16 &&
         (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx);
}

struct OnednnConv::Impl {
  ConvGeometry g;
  ConvPass pass;
  Precision precision;
  OnednnConv::Bf16Operands operands = OnednnConv::Bf16Operands::kRounded;
  int threads = 0;  // the pool size the primitives were created for

  dnnl::primitive conv;
  // bf16 forward: the same convolution writing its output in bf16, for an output the caller keeps
  // in bf16; absent where oneDNN has none. Its weights: the reorder into its layout (the
  // fp32-destination primitive's where the layouts match; none where it takes the caller's
  // weights as they are) and the memory it reads them from.
  dnnl::primitive conv_bf16_out;
  memory out_bf16_user;
  std::optional<Reorder> weight_in_bf16_out;
  memory bf16_out_weights;
  std::string implementation;
  // nostrum's layouts, fp32: the input side (N,C,H,W as NHWC), the output side (N,K,P,Q as NHWC),
  // the weights (K,C,R,S).
  memory::desc in_md, out_md, weight_md;
  // The caller's tensors in those layouts, their handles set per call.
  memory in_user, out_user, weight_user;
  // Reorders into the primitive's operands (absent where the layout already matches): the weights
  // to the primitive's layout (and bf16), the input or the output gradient to bf16; and out of it:
  // the weight gradient to (K,C,R,S).
  std::optional<Reorder> weight_in, activation_in, gradient_in, weight_gradient_out;
  // The primitive's operands that live in the workspace, each at its offset there (bytes, 64-byte
  // aligned); handles set per call. A bf16 operand the caller gives (Bf16Operands::kGiven) is
  // not in the workspace: its handle is the caller's tensor.
  struct Region {
    memory m;
    size_t offset = 0;
    bool in_workspace = true;
  };
  Region weights, activation, gradient, weight_gradient, sum, scratchpad, weights_bf16_out;
  // Backward-data accumulating: oneDNN 2.x has no sum post-op there, so the gradient of a chunk of
  // `chunk` images goes to `sum` and is added into d_in, chunk by chunk (NHWC: a chunk of images
  // is contiguous). chunk == N: the whole batch at once, on the pass's own primitive; otherwise
  // on chunk_conv, the same convolution for `chunk` images on the same weight layout.
  int chunk = 0;
  dnnl::primitive chunk_conv;
  memory chunk_diff_dst;    // a chunk's output gradient (fp32 or bf16), its handle set per chunk
  size_t workspace = 0;     // bytes of the whole layout
  size_t limit = SIZE_MAX;  // the most the caller's workspace holds
  bool built = false;
  size_t promised = 0;   // what workspace_bytes() reports (the first build's, if within the limit)
  Buffer own_workspace;  // where the layout needs more than was promised
  // Every execute's arguments, made once (memory objects are handles: setting a handle above
  // changes what these pass): a call allocates nothing.
  using Args = std::unordered_map<int, memory>;
  Args conv_args, accumulate_args, chunk_args, weight_in_args, activation_in_args, gradient_in_args,
      weight_gradient_out_args, conv_bf16_out_args, weight_in_bf16_out_args;

  void make_args();

  void build();
  static void point(memory& m, const float* p) { m.set_data_handle(const_cast<float*>(p)); }
  Region region(const memory::desc& md) {
    Region r{memory(md, cpu_engine(), DNNL_MEMORY_NONE), workspace};
    workspace += (md.get_size() + 63) / 64 * 64;
    return r;
  }
  // The workspace of this call: the caller's, or this object's own after a growing rebuild; every
  // region's handle pointed into it.
  void attach(void* given) {
    if (omp_get_max_threads() != threads) build();
    char* base = static_cast<char*>(own_workspace.bytes() ? own_workspace.data() : given);
    NOSTRUM_CHECK(base != nullptr || workspace == 0, Error,
                  "oneDNN conv called without its workspace", describe(g));
    for (Region* r :
         {&weights, &activation, &gradient, &weight_gradient, &sum, &scratchpad, &weights_bf16_out})
      if (r->m && r->in_workspace) r->m.set_data_handle(base + r->offset);
  }
  static void run(const std::optional<Reorder>& r, const Args& args) {
    if (r) r->primitive.execute(cpu_stream(), args);
  }
  // The backward passes' output gradient as the primitive's bf16 operand: the caller's bf16 copy
  // where given (no reorder), else the caller's fp32 one rounded into the workspace (bf16) or read
  // as it is (fp32).
  void take_gradient(const uint16_t* d_out_bf16) {
    take(d_out_bf16, gradient_in, gradient_in_args, gradient, "output gradient");
  }
  // The forward and weight-gradient passes' input likewise.
  void take_input(const uint16_t* in_bf16) {
    take(in_bf16, activation_in, activation_in_args, activation, "input");
  }
  void take(const uint16_t* given, const std::optional<Reorder>& rounding, const Args& args,
            Region& operand, const char* what) {
    const bool bf16 = precision == Precision::kBf16;
    if (!given) {
      NOSTRUM_CHECK(!bf16 || rounding, Error,
                    std::string("oneDNN conv: an fp32 ") + what +
                        " for a primitive built for bf16 operands given by the caller",
                    describe(g));
      return run(rounding, args);
    }
    NOSTRUM_CHECK(bf16, Error,
                  std::string("oneDNN conv: a bf16 ") + what + " for an fp32 primitive",
                  describe(g));
    operand.m.set_data_handle(const_cast<uint16_t*>(given));
  }
};

void OnednnConv::Impl::build() {
  threads = omp_get_max_threads();
  const memory::dim N = g.N, C = g.C, H = g.H, W = g.W, K = g.K, R = g.R, S = g.S, P = g.P(),
                    Q = g.Q();
  // The right/bottom padding the last window needs (PyTorch's floor rule: may be below pad).
  const memory::dims strides = {g.stride, g.stride}, pad_l = {g.pad, g.pad},
                     pad_r = {(P - 1) * g.stride + R - H - g.pad,
                              (Q - 1) * g.stride + S - W - g.pad};
  in_md = memory::desc({N, C, H, W}, Type::f32, Tag::nhwc);
  out_md = memory::desc({N, K, P, Q}, Type::f32, Tag::nhwc);
  weight_md = memory::desc({K, C, R, S}, Type::f32, Tag::oihw);
  const Type operand = precision == Precision::kBf16 ? Type::bf16 : Type::f32;
  const memory::desc in_op({N, C, H, W}, operand, Tag::nhwc),
      out_op({N, K, P, Q}, operand, Tag::nhwc), weight_any({K, C, R, S}, operand, Tag::any),
      weight_gradient_any({K, C, R, S}, Type::f32, Tag::any);
  const auto algorithm = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);

  // The forward descriptor: the primitive of kForward, the hint of the backward passes.
  const dnnl::convolution_forward::desc forward_desc(dnnl::prop_kind::forward_training, algorithm,
                                                     in_op, weight_any, out_md, strides, pad_l,
                                                     pad_r);
  const dnnl::convolution_forward::primitive_desc forward_pd(forward_desc, attr, cpu_engine());
  size_t scratch = 0;
  weight_in.reset(), activation_in.reset(), gradient_in.reset(), weight_gradient_out.reset();
  weight_in_bf16_out.reset();
  bf16_out_weights = memory();
  weights = activation = gradient = weight_gradient = sum = scratchpad = weights_bf16_out =
      Region();
  workspace = 0;

  // The weights in the primitive's layout; the reorder from (K,C,R,S) fp32 runs on every call
  // (their values change every step) unless the layouts are the same.
  auto prepare_weights = [&](const memory::desc& md) {
    if (md == weight_md) return;  // the caller's weights as they are
    weight_in = make_reorder(weight_md, md);
    weights = region(md);
    scratch = std::max(scratch, weight_in->scratch_bytes);
  };
  // bf16 operands: the caller's fp32 tensor rounded into an NHWC bf16 copy, or the caller's bf16
  // tensor read as it is (kGiven: no copy, no reorder).
  auto prepare_rounded = [&](const memory::desc& fp32, const memory::desc& md,
                             std::optional<Reorder>& r, Region& copy) {
    if (precision != Precision::kBf16) return;
    if (operands == OnednnConv::Bf16Operands::kGiven) {
      copy = Region{memory(md, cpu_engine(), DNNL_MEMORY_NONE), 0, false};
      return;
    }
    r = make_reorder(fp32, md);
    copy = region(md);
    scratch = std::max(scratch, r->scratch_bytes);
  };

  switch (pass) {
    case ConvPass::kForward: {
      conv = dnnl::convolution_forward(forward_pd);
      implementation = forward_pd.impl_info_str();
      scratch = std::max(scratch, forward_pd.scratchpad_desc().get_size());
      prepare_weights(forward_pd.weights_desc());
      prepare_rounded(in_md, forward_pd.src_desc(), activation_in, activation);
      conv_bf16_out = dnnl::primitive();
      if (precision == Precision::kBf16) {
        try {
          // Its own weight layout: on the fp32 destination's, oneDNN 2.6 has only its reference
          // code for some shapes (ResNet-50 224's 1x1 1024->512 at 14x14, 8,000x slower).
          const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, algorithm,
                                                     in_op, weight_any, out_op, strides, pad_l,
                                                     pad_r);
          const dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
          if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
            conv_bf16_out = dnnl::convolution_forward(pd);
            scratch = std::max(scratch, pd.scratchpad_desc().get_size());
            out_bf16_user = memory(out_op, cpu_engine(), DNNL_MEMORY_NONE);
            const memory::desc& w = pd.weights_desc();
            if (w == forward_pd.weights_desc() && weight_in) {
              weight_in_bf16_out = weight_in;
              bf16_out_weights = weights.m;
            } else if (w != weight_md) {
              weight_in_bf16_out = make_reorder(weight_md, w);
              weights_bf16_out = region(w);
              bf16_out_weights = weights_bf16_out.m;
              scratch = std::max(scratch, weight_in_bf16_out->scratch_bytes);
            }
          }
        } catch (const dnnl::error&) {
          conv_bf16_out = dnnl::primitive();  // fp32 outputs only
        }
      }
      break;
    }
    case ConvPass::kBackwardData: {
      const dnnl::convolution_backward_data::desc desc(algorithm, in_md, weight_any, out_op,
                                                       strides, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, cpu_engine(),
                                                               forward_pd);
      conv = dnnl::convolution_backward_data(pd);
      implementation = pd.impl_info_str();
      scratch = std::max(scratch, pd.scratchpad_desc().get_size());
      prepare_weights(pd.weights_desc());
      prepare_rounded(out_md, pd.diff_dst_desc(), gradient_in, gradient);
      // The chunk: the most images dividing N whose fp32 gradient fits kSumBudgetBytes.
      const size_t image_bytes = size_t(C) * H * W * sizeof(float);
      chunk = 1;
      for (int d = g.N; d >= 1; --d)
        if (g.N % d == 0 && size_t(d) * image_bytes <= kSumBudgetBytes) {
          chunk = d;
          break;
        }
      chunk_conv = dnnl::primitive();
      if (chunk < g.N) {
        const memory::desc chunk_in({chunk, C, H, W}, Type::f32, Tag::nhwc),
            chunk_out({chunk, K, P, Q}, operand, Tag::nhwc);
        const dnnl::convolution_forward::desc chunk_forward(
            dnnl::prop_kind::forward_training, algorithm,
            memory::desc({chunk, C, H, W}, operand, Tag::nhwc), pd.weights_desc(),
            memory::desc({chunk, K, P, Q}, Type::f32, Tag::nhwc), strides, pad_l, pad_r);
        const dnnl::convolution_backward_data::desc chunk_desc(
            algorithm, chunk_in, pd.weights_desc(), chunk_out, strides, pad_l, pad_r);
        try {
          const dnnl::convolution_backward_data::primitive_desc chunk_pd(
              chunk_desc, attr, cpu_engine(),
              dnnl::convolution_forward::primitive_desc(chunk_forward, attr, cpu_engine()));
          chunk_conv = dnnl::convolution_backward_data(chunk_pd);
          scratch = std::max(scratch, chunk_pd.scratchpad_desc().get_size());
          chunk_diff_dst = memory(chunk_out, cpu_engine(), DNNL_MEMORY_NONE);
          sum = region(chunk_in);
        } catch (const dnnl::error&) {
          chunk = g.N;  // not on this weight layout: the whole batch at once
        }
      }
      if (chunk == g.N) sum = region(in_md);
      break;
    }
    case ConvPass::kBackwardWeights: {
      const dnnl::convolution_backward_weights::desc desc(algorithm, in_op, weight_gradient_any,
                                                          out_op, strides, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, cpu_engine(),
                                                                  forward_pd);
      conv = dnnl::convolution_backward_weights(pd);
      implementation = pd.impl_info_str();
      scratch = std::max(scratch, pd.scratchpad_desc().get_size());
      prepare_rounded(in_md, pd.src_desc(), activation_in, activation);
      prepare_rounded(out_md, pd.diff_dst_desc(), gradient_in, gradient);
      if (pd.diff_weights_desc() != weight_md) {
        weight_gradient_out = make_reorder(pd.diff_weights_desc(), weight_md);
        weight_gradient = region(pd.diff_weights_desc());
        scratch = std::max(scratch, weight_gradient_out->scratch_bytes);
      }
      break;
    }
  }
  // One scratchpad for the convolution and its reorders: they run one after the other.
  scratchpad = region(memory::desc({memory::dim(std::max<size_t>(scratch, 1))}, Type::u8, Tag::x));
  if (!built) promised = workspace <= limit ? workspace : 0, built = true;
  own_workspace = workspace > promised ? Buffer(workspace) : Buffer();
  in_user = memory(in_md, cpu_engine(), DNNL_MEMORY_NONE);
  out_user = memory(out_md, cpu_engine(), DNNL_MEMORY_NONE);
  weight_user = memory(weight_md, cpu_engine(), DNNL_MEMORY_NONE);
  make_args();
}

void OnednnConv::Impl::make_args() {
  const auto reorder_args = [&](const memory& from, const memory& to) {
    return Args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratchpad.m}};
  };
  const memory& w = weight_in ? weights.m : weight_user;
  weight_in_args = weight_in ? reorder_args(weight_user, weights.m) : Args{};
  conv_args = accumulate_args = chunk_args = activation_in_args = gradient_in_args =
      weight_gradient_out_args = conv_bf16_out_args = weight_in_bf16_out_args = Args{};
  switch (pass) {
    case ConvPass::kForward:
      if (activation_in) activation_in_args = reorder_args(in_user, activation.m);
      conv_args = {{DNNL_ARG_SRC, activation.m ? activation.m : in_user},
                   {DNNL_ARG_WEIGHTS, w},
                   {DNNL_ARG_DST, out_user},
                   {DNNL_ARG_SCRATCHPAD, scratchpad.m}};
      if (conv_bf16_out) {
        conv_bf16_out_args = conv_args;
        conv_bf16_out_args[DNNL_ARG_DST] = out_bf16_user;
        conv_bf16_out_args[DNNL_ARG_WEIGHTS] = weight_in_bf16_out ? bf16_out_weights : weight_user;
        if (weight_in_bf16_out)
          weight_in_bf16_out_args = reorder_args(weight_user, bf16_out_weights);
      }
      break;
    case ConvPass::kBackwardData: {
      if (gradient_in) gradient_in_args = reorder_args(out_user, gradient.m);
      const memory& diff_dst = gradient.m ? gradient.m : out_user;
      conv_args = {{DNNL_ARG_DIFF_DST, diff_dst},
                   {DNNL_ARG_WEIGHTS, w},
                   {DNNL_ARG_DIFF_SRC, in_user},
                   {DNNL_ARG_SCRATCHPAD, scratchpad.m}};
      accumulate_args = conv_args;
      accumulate_args[DNNL_ARG_DIFF_SRC] = sum.m;
      if (chunk < g.N)
        chunk_args = {{DNNL_ARG_DIFF_DST, chunk_diff_dst},
                      {DNNL_ARG_WEIGHTS, w},
                      {DNNL_ARG_DIFF_SRC, sum.m},
                      {DNNL_ARG_SCRATCHPAD, scratchpad.m}};
      break;
    }
    case ConvPass::kBackwardWeights:
      if (activation_in) activation_in_args = reorder_args(in_user, activation.m);
      if (gradient_in) gradient_in_args = reorder_args(out_user, gradient.m);
      conv_args = {{DNNL_ARG_SRC, activation.m ? activation.m : in_user},
                   {DNNL_ARG_DIFF_DST, gradient.m ? gradient.m : out_user},
                   {DNNL_ARG_DIFF_WEIGHTS, weight_gradient_out ? weight_gradient.m : weight_user},
                   {DNNL_ARG_SCRATCHPAD, scratchpad.m}};
      if (weight_gradient_out)
        weight_gradient_out_args = reorder_args(weight_gradient.m, weight_user);
      break;
  }
}

OnednnConv::OnednnConv(const ConvGeometry& g, ConvPass pass, Precision precision,
                       size_t workspace_limit, Bf16Operands operands)
    : impl_(std::make_unique<Impl>()) {
  NOSTRUM_CHECK(g.N > 0 && g.H > 0 && g.W > 0 && g.C > 0 && g.K > 0 && g.R > 0 && g.S > 0 &&
                    g.stride > 0 && g.pad >= 0 && g.P() > 0 && g.Q() > 0,
                ShapeError, "conv sizes must be positive and the kernel fit the padded input",
                describe(g));
  if (precision == Precision::kBf16)
    NOSTRUM_CHECK(onednn_bf16_native(), OptionError,
                  "oneDNN bf16 convolutions need AVX512_BF16 or AMX (oneDNN dispatches to " +
                      onednn_library().isa + ")",
                  describe(g), "use fp32, or lift DNNL_MAX_CPU_ISA / NOSTRUM_MAX_ISA");
  Impl& m = *impl_;
  m.g = g, m.pass = pass, m.precision = precision, m.limit = workspace_limit;
  m.operands = operands;
  try {
    m.build();
  } catch (const dnnl::error& e) {
    throw Error(std::string("oneDNN could not create the ") + conv_pass_name(pass) +
                    " primitive: " + e.what(),
                describe(g));
  }
}

OnednnConv::~OnednnConv() = default;
OnednnConv::OnednnConv(OnednnConv&&) noexcept = default;
OnednnConv& OnednnConv::operator=(OnednnConv&&) noexcept = default;

namespace {

void require_pass(ConvPass have, ConvPass want, const char* call, const ConvGeometry& g) {
  NOSTRUM_CHECK(have == want, Error,
                std::string("OnednnConv::") + call + " on a " + conv_pass_name(have) + " object",
                describe(g));
}

}  // namespace

void OnednnConv::forward(float* out, const float* in, const float* weight, void* workspace,
                         const uint16_t* in_bf16, uint16_t* out_bf16) {
  Impl& m = *impl_;
  require_pass(m.pass, ConvPass::kForward, "forward", m.g);
  NOSTRUM_CHECK(!out_bf16 || m.conv_bf16_out, Error,
                "oneDNN conv: a bf16 output from a primitive without one", describe(m.g));
  m.attach(workspace);
  Impl::point(m.in_user, in), Impl::point(m.weight_user, weight), Impl::point(m.out_user, out);
  // The primitive writing the output's type, after the weights' reorder into its layout.
  const bool bf16_out = out_bf16 != nullptr;
  if (bf16_out) m.out_bf16_user.set_data_handle(out_bf16);
  Impl::run(bf16_out ? m.weight_in_bf16_out : m.weight_in,
            bf16_out ? m.weight_in_bf16_out_args : m.weight_in_args);
  m.take_input(in_bf16);
  (bf16_out ? m.conv_bf16_out : m.conv)
      .execute(cpu_stream(), bf16_out ? m.conv_bf16_out_args : m.conv_args);
  cpu_stream().wait();
}

bool OnednnConv::writes_bf16_out() const {
  return bool(impl_->conv_bf16_out);
}

void OnednnConv::backward_data(float* d_in, const float* d_out, const float* weight,
                               bool accumulate, void* workspace, const uint16_t* d_out_bf16,
                               DInFinisher* finish, int64_t first_row) {
  Impl& m = *impl_;
  require_pass(m.pass, ConvPass::kBackwardData, "backward_data", m.g);
  m.attach(workspace);
  Impl::point(m.out_user, d_out), Impl::point(m.weight_user, weight), Impl::point(m.in_user, d_in);
  Impl::run(m.weight_in, m.weight_in_args);
  m.take_gradient(d_out_bf16);
  const int64_t image_rows = int64_t(m.g.H) * m.g.W;
  // Rows [r0, r1) of d_in final once add (or nothing) is added onto them.
  const auto rows_done = [&](const float* add, int64_t r0, int64_t r1) {
    if (finish)
      finish->finish(add, first_row + r0, first_row + r1);
    else if (add)
      parallel_add(d_in + r0 * m.g.C, add, (r1 - r0) * m.g.C);
  };
  if (!accumulate || m.chunk == m.g.N) {
    m.conv.execute(cpu_stream(), accumulate ? m.accumulate_args : m.conv_args);
    cpu_stream().wait();
    rows_done(accumulate ? static_cast<const float*>(m.sum.m.get_data_handle()) : nullptr, 0,
              m.g.N * image_rows);
    return;
  }
  // Chunk by chunk: images [n, n + chunk) of d_out (fp32, or its bf16 copy) -> sum -> d_in.
  const size_t out_chunk_bytes = size_t(m.chunk) * m.g.P() * m.g.Q() * m.g.K *
                                 (m.precision == Precision::kBf16 ? 2 : sizeof(float));
  char* diff_dst_base =
      static_cast<char*>((m.gradient.m ? m.gradient.m : m.out_user).get_data_handle());
  const float* add = static_cast<const float*>(m.sum.m.get_data_handle());
  for (int n = 0, i = 0; n < m.g.N; n += m.chunk, ++i) {
    m.chunk_diff_dst.set_data_handle(diff_dst_base + size_t(i) * out_chunk_bytes);
    m.chunk_conv.execute(cpu_stream(), m.chunk_args);
    cpu_stream().wait();
    rows_done(add, n * image_rows, (n + m.chunk) * image_rows);
  }
}

void OnednnConv::backward_weights(float* d_weight, const float* d_out, const float* in,
                                  void* workspace, const uint16_t* d_out_bf16,
                                  const uint16_t* in_bf16) {
  Impl& m = *impl_;
  require_pass(m.pass, ConvPass::kBackwardWeights, "backward_weights", m.g);
  m.attach(workspace);
  Impl::point(m.out_user, d_out), Impl::point(m.in_user, in), Impl::point(m.weight_user, d_weight);
  m.take_input(in_bf16);
  m.take_gradient(d_out_bf16);
  m.conv.execute(cpu_stream(), m.conv_args);
  Impl::run(m.weight_gradient_out, m.weight_gradient_out_args);
  cpu_stream().wait();
}

size_t OnednnConv::workspace_bytes() const {
  return impl_->promised;
}

std::string OnednnConv::implementation() const {
  return impl_->implementation;
}

ConvPass OnednnConv::pass() const {
  return impl_->pass;
}

const ConvGeometry& OnednnConv::geometry() const {
  return impl_->g;
}

}  // namespace nostrum::kernels
