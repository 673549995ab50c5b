// nostrum-conv-bench: times every distinct convolution of ResNet-50 or resnet8 (forward,
// backward-data, backward-weights) in fp32 or bf16 (--precision), nostrum's own kernels and, with
// --onednn, oneDNN's primitives interleaved conv by conv; an SGEMM ceiling probe and, where the CPU
// has AVX512_BF16, the bf16 ceiling probes (vdpbf16ps in registers; the bf16 GEMM on 2048^3);
// prints a table and one JSON line per conv and kernel.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model_convs.hpp"
#include "nostrum/core/arena.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/blas_kernels.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/onednn_conv.hpp"
#include "nostrum/kernels/precision_choice.hpp"
#include "nostrum/layers/conv2d.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Least seconds of `repeats` runs of fn after one warm-up run: on a shared machine other work only
// ever adds time, so the minimum is the best estimate of the kernel's own cost.
// --clock cpu: the process's CPU time (CLOCK_PROCESS_CPUTIME_ID) in place of the wall clock. On a
// shared machine a 1-thread run then does not count the time it spent descheduled (with more
// threads it would count the pool's spin-waits, so it is for 1 thread).
bool g_cpu_clock = false;

double now_seconds() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double best_seconds(int repeats, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const double start = now_seconds();
    fn();
    t.push_back(now_seconds() - start);
  }
  std::sort(t.begin(), t.end());
  return t.front();
}

void fill_random(float* p, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) p[i] = u(rng);
}

struct Options {
  std::string model = "resnet50";          // resnet50 | resnet8 (28x28x1, width 16)
  int image = 0, batch = 32, repeats = 3;  // image 0: the model's (224, 28)
  std::string only;                        // substring of the conv name
  bool list = false, ceiling = true;
  bool onednn = false;  // oneDNN's primitives too, after nostrum's modes for each conv
  size_t budget = 0;    // im2col tile buffer in floats (0: the library default)
  std::vector<nostrum::layers::ConvThreading> threadings = {nostrum::layers::ConvThreading::kAuto};
  std::vector<nostrum::layers::ConvAlgorithm> algorithms = {nostrum::layers::ConvAlgorithm::kAuto};
  nostrum::kernels::Precision precision = nostrum::kernels::Precision::kFp32;
};

// The names of a mode option's values; "all" on the command line means every one, interleaved per
// conv so that the modes see the same machine load.
template <typename E>
struct Named {
  const char* name;
  E value;
};
constexpr Named<nostrum::layers::ConvThreading> kThreadings[] = {
    {"auto", nostrum::layers::ConvThreading::kAuto},
    {"shared", nostrum::layers::ConvThreading::kSharedGemm},
    {"per-thread", nostrum::layers::ConvThreading::kPerThread}};
constexpr Named<nostrum::layers::ConvAlgorithm> kAlgorithms[] = {
    {"auto", nostrum::layers::ConvAlgorithm::kAuto},
    {"gemm", nostrum::layers::ConvAlgorithm::kGemm},
    {"direct", nostrum::layers::ConvAlgorithm::kDirect}};

template <typename E, size_t N>
const char* name_of(const Named<E> (&table)[N], E value) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  return "?";
}

template <typename E, size_t N>
std::vector<E> parse_modes(const Named<E> (&table)[N], const std::string& value,
                           const std::string& option) {
  std::vector<E> modes;
  std::string names;
  for (const auto& n : table) {
    if (value == "all" || value == n.name) modes.push_back(n.value);
    names += std::string(n.name) + ", ";
  }
  if (modes.empty())
    throw nostrum::OptionError("unknown value '" + value + "'", option, "use " + names + "or all");
  return modes;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      NOSTRUM_CHECK(i + 1 < argc, nostrum::OptionError, "missing value", a);
      return argv[++i];
    };
    if (a == "--model")
      o.model = value();
    else if (a == "--image")
      o.image = std::stoi(value());
    else if (a == "--batch")
      o.batch = std::stoi(value());
    else if (a == "--repeats")
      o.repeats = std::stoi(value());
    else if (a == "--clock") {
      const std::string c = value();
      if (c != "wall" && c != "cpu")
        throw nostrum::OptionError("unknown clock '" + c + "'", "--clock", "use wall or cpu");
      g_cpu_clock = c == "cpu";
    } else if (a == "--only")
      o.only = value();
    else if (a == "--list")
      o.list = true;
    else if (a == "--no-ceiling")
      o.ceiling = false;
    else if (a == "--onednn")
      o.onednn = true;
    else if (a == "--budget")
      o.budget = std::stoul(value());
    else if (a == "--precision")
      o.precision = nostrum::kernels::parse_precision(value());
    else if (a == "--threading")
      o.threadings = parse_modes(kThreadings, value(), a);
    else if (a == "--algorithm")
      o.algorithms = parse_modes(kAlgorithms, value(), a);
    else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: nostrum-conv-bench [--model resnet50|resnet8] [--image 224|28] [--batch 32] "
          "[--repeats 3] "
          "[--threading auto|shared|per-thread|all] [--algorithm auto|gemm|direct|all] "
          "[--budget FLOATS] [--only NAME-SUBSTRING] [--list] [--no-ceiling] "
          "[--precision fp32|bf16] [--clock wall|cpu] [--onednn]\n"
          "  --threading: of the GEMM path; --algorithm: direct AVX-512 kernels or GEMMs (all: "
          "interleaved per conv)\n"
          "  --list prints each conv's geometry as JSON and exits; --no-ceiling skips the "
          "SGEMM and bf16 probes\n"
          "  --precision bf16: the convs on the vdpbf16ps GEMM (needs AVX512_BF16); percentages "
          "then of the bf16 dot-product probe\n"
          "  --onednn: oneDNN's primitives too, each conv right after nostrum's modes (same load), "
          "reorders in and out of nostrum's layouts included; prints the time ratios\n");
      std::exit(0);
    } else {
      throw nostrum::OptionError("unknown option", a, "see --help");
    }
  }
  NOSTRUM_CHECK(nostrum::bench::is_bench_model(o.model), nostrum::OptionError,
                "unknown model '" + o.model + "'", "--model", "use resnet50 or resnet8");
  o.image = nostrum::bench::bench_model_image(o.model, o.image);
  NOSTRUM_CHECK(o.image > 0 && o.batch > 0 && o.repeats > 0, nostrum::OptionError,
                "--image, --batch and --repeats must be positive", "options");
  return o;
}

// GFLOP/s of a 2048^3 SGEMM on the whole pool: the machine's practical fp32 ceiling.
double sgemm_ceiling(int repeats) {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  fill_random(a.data(), a.size(), 1);
  fill_random(b.data(), b.size(), 2);
  const double s = best_seconds(repeats, [&] {
    nostrum::kernels::gemm(nostrum::kernels::Trans::kNo, nostrum::kernels::Trans::kNo, n, n, n,
                           1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * n / s * 1e-9;
}

// GFLOP/s of a register probe (precision_choice.hpp) on every thread of the pool at once: the
// arithmetic ceilings, as the SGEMM probe is fp32's practical one. vdpbf16ps (16 lanes x 2
// products x 2 flops an instruction; 0 without AVX512_BF16) and FMA (zmm where the CPU has
// AVX-512, else ymm: fp32_fma_probe_isa()); on a CPU where vdpbf16ps issues at half FMA's rate the
// two read the same. AMX tiles (16 x 16 x 32 bf16 a tdpbf16ps, 4 accumulators) where granted: the
// bf16 ceiling of oneDNN's AMX primitives.
double register_ceiling(int repeats, double (*probe_gflops)(int64_t),
                        int64_t iterations = 20000000) {
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    double sum = 0;
#pragma omp parallel reduction(+ : sum)
    {
      // --clock cpu: the probe's flops (its rate x the wall time around it) over this thread's
      // CPU time.
      timespec c0, c1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      const auto w0 = Clock::now();
      const double gflops = probe_gflops(iterations);
      const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      const double cpu = double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec);
      sum += g_cpu_clock && cpu > 0 ? gflops * wall / cpu : gflops;
    }
    best = std::max(best, sum);
  }
  return best;
}

double bf16_dot_ceiling(int repeats) {
  if (!nostrum::kernels::bf16_available()) return 0.0;
  return register_ceiling(repeats, nostrum::kernels::bf16_dot_probe_gflops);
}

// 0 where the AMX tiles cannot run (no AMX_TILE/AMX_BF16, Linux refused them, or the cap).
double amx_tile_ceiling(int repeats) {
  if (!nostrum::kernels::amx_tile_probe_available()) return 0.0;
  return register_ceiling(repeats, nostrum::kernels::amx_tile_probe_gflops, 1 << 22);
}

double fp32_fma_ceiling(int repeats) {
  return register_ceiling(repeats, nostrum::kernels::fp32_fma_probe_gflops);
}

// GFLOP/s of the bf16 GEMM (nostrum's vdpbf16ps kernel, packing included) on 2048^3.
double bf16_gemm_ceiling(int repeats) {
  if (!nostrum::kernels::bf16_available()) return 0.0;
  const int n = 2048;
  std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  fill_random(a.data(), a.size(), 1);
  fill_random(b.data(), b.size(), 2);
  const double s = best_seconds(repeats, [&] {
    nostrum::kernels::gemm_bf16(nostrum::kernels::Trans::kNo, nostrum::kernels::Trans::kNo, n, n, n,
                                1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * n / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) try {
  nostrum::kernels::select_blas_kernels(argv);  // as nostrum-train: may re-exec (AVX-512)
  const Options opt = parse(argc, argv);
  const auto convs = nostrum::bench::bench_model_convs(opt.model, opt.image, opt.batch);
  nostrum::layers::ConvOptions conv_options;
  conv_options.column_budget_floats = opt.budget;
  conv_options.precision = opt.precision;
  const bool bf16 = opt.precision == nostrum::kernels::Precision::kBf16;
  if (opt.list) {
    for (const auto& c : convs) {
      const auto& g = c.geometry;
      std::printf(
          "{\"conv\": \"%s\", \"count\": %d, \"N\": %d, \"H\": %d, \"W\": %d, "
          "\"C\": %d, \"K\": %d, \"R\": %d, \"S\": %d, \"stride\": %d, \"pad\": %d}\n",
          c.name.c_str(), c.count, g.N, g.H, g.W, g.C, g.K, g.R, g.S, g.stride, g.pad);
    }
    return 0;
  }

  size_t in_max = 0, out_max = 0, w_max = 0, scratch_max = 0;
  for (const auto& c : convs) {
    const auto& g = c.geometry;
    in_max = std::max(in_max, size_t(g.N) * g.H * g.W * g.C);
    out_max = std::max(out_max, size_t(g.N) * g.P() * g.Q() * g.K);
    w_max = std::max(w_max, size_t(g.K) * g.C * g.R * g.S);
    scratch_max = std::max(scratch_max, nostrum::layers::conv2d_scratch_floats(g, conv_options));
  }
  nostrum::Arena arena(4 * nostrum::Arena::padded(in_max) + 2 * nostrum::Arena::padded(out_max) +
                           2 * nostrum::Arena::padded(w_max) + nostrum::Arena::padded(scratch_max),
                       "conv bench");
  float* in = arena.take(in_max, "in");
  float* d_in = arena.take(in_max, "d_in");
  float* out = arena.take(out_max, "out");
  float* d_out = arena.take(out_max, "d_out");
  float* weight = arena.take(w_max, "weight");
  float* d_weight = arena.take(w_max, "d_weight");
  float* scratch = arena.take(scratch_max, "scratch");
  fill_random(in, in_max, 3);
  fill_random(d_out, out_max, 4);
  fill_random(weight, w_max, 5);

  const double sgemm = opt.ceiling ? sgemm_ceiling(opt.repeats) : 0.0;
  const double bf16_dot = opt.ceiling ? bf16_dot_ceiling(opt.repeats) : 0.0;
  const double amx_tile = opt.ceiling ? amx_tile_ceiling(opt.repeats) : 0.0;
  const double bf16_gemm = opt.ceiling ? bf16_gemm_ceiling(opt.repeats) : 0.0;
  const double fma_dot = opt.ceiling ? fp32_fma_ceiling(opt.repeats) : 0.0;
  // The percentages: of SGEMM in fp32, of the faster bf16 register ceiling (vdpbf16ps or AMX
  // tiles) in bf16.
  const double ceiling = bf16 ? std::max(bf16_dot, amx_tile) : sgemm;
  auto pct = [&](double gflops) { return ceiling > 0 ? 100.0 * gflops / ceiling : 0.0; };
  std::printf(
      "# nostrum-conv-bench: threads %d, openblas core %s, oneDNN %s (%s), SGEMM 2048^3 %.1f "
      "GFLOP/s, BF16-DOT %.1f GFLOP/s, AMX-TILE %.1f GFLOP/s, BF16-GEMM 2048^3 %.1f GFLOP/s, "
      "FP32-FMA-DOT (%s) %.1f GFLOP/s, precision %s, %s\n",
      omp_get_max_threads(), nostrum::kernels::blas_core_name().c_str(),
      nostrum::kernels::onednn_library().version.c_str(),
      nostrum::kernels::onednn_library().isa.c_str(), sgemm, bf16_dot, amx_tile, bf16_gemm,
      nostrum::kernels::fp32_fma_probe_isa(), fma_dot,
      nostrum::kernels::precision_name(opt.precision), nostrum::cpu_features().describe().c_str());
  std::printf("# %-36s %-18s %3s %8s %8s %8s  %5s %5s %5s  (GFLOP/s; ms per call; %% of ceiling)\n",
              "conv", "threading/algorithm", "n", "fwd", "bwd-d", "bwd-w", "fwd%", "bwd-d%",
              "bwd-w%");
  double total_flops = 0.0, total_seconds = 0.0;
  // Per pass, the step's seconds of nostrum's first mode and of oneDNN (--onednn).
  double nostrum_pass[3] = {0, 0, 0}, onednn_pass[3] = {0, 0, 0};
  double faster_pass[3] = {0, 0, 0};  // the faster of the two, conv by conv
  int onednn_wins[3] = {0, 0, 0}, compared = 0;
  double first_mode[3] = {0, 0, 0};  // this conv's nostrum times (fwd, bwd-d, bwd-w)
  std::vector<unsigned char> workspace;
  auto report = [&](const nostrum::bench::NamedConv& c, const std::string& threading,
                    const std::string& algorithm, double fwd, double bwd_d, double bwd_w,
                    const std::string& impl) {
    const double gf = c.geometry.forward_flops() * 1e-9;
    std::printf("  %-36s %-18s %3d %8.1f %8.1f %8.1f  %5.0f %5.0f %5.0f   %.1f %.1f %.1f ms\n",
                c.name.c_str(), (threading + "/" + algorithm).c_str(), c.count, gf / fwd,
                gf / bwd_d, gf / bwd_w, pct(gf / fwd), pct(gf / bwd_d), pct(gf / bwd_w), fwd * 1e3,
                bwd_d * 1e3, bwd_w * 1e3);
    std::printf(
        "{\"conv\": \"%s\", \"threading\": \"%s\", \"algorithm\": \"%s\", \"count\": %d, "
        "\"threads\": %d, \"gflop\": %.4f, "
        "\"forward_gflops\": %.2f, \"backward_data_gflops\": %.2f, "
        "\"backward_weights_gflops\": %.2f, \"sgemm_gflops\": %.2f, \"precision\": \"%s\", "
        "\"bf16_dot_gflops\": %.2f, \"amx_tile_gflops\": %.2f%s}\n",
        c.name.c_str(), threading.c_str(), algorithm.c_str(), c.count, omp_get_max_threads(), gf,
        gf / fwd, gf / bwd_d, gf / bwd_w, sgemm, nostrum::kernels::precision_name(opt.precision),
        bf16_dot, amx_tile, impl.c_str());
  };
  for (const auto& c : convs) {
    if (!opt.only.empty() && c.name.find(opt.only) == std::string::npos) continue;
    const auto& g = c.geometry;
    const double flops = g.forward_flops();
    const bool stem = g.C <= 4;  // the stem needs no input gradient
    bool first = true;
    for (const auto threading : opt.threadings)
      for (const auto algorithm : opt.algorithms) {
        conv_options.threading = threading;
        conv_options.algorithm = algorithm;
        const double fwd = best_seconds(opt.repeats, [&] {
          nostrum::layers::conv2d_forward(out, in, weight, g, scratch, conv_options);
        });
        const double bwd_w = best_seconds(opt.repeats, [&] {
          nostrum::layers::conv2d_backward_weights(d_weight, d_out, in, g, scratch, conv_options);
        });
        const double bwd_d = best_seconds(opt.repeats, [&] {
          nostrum::layers::conv2d_backward_data(d_in, d_out, weight, g, scratch, conv_options);
        });
        report(c, name_of(kThreadings, threading), name_of(kAlgorithms, algorithm), fwd, bwd_d,
               bwd_w, "");
        if (!first) continue;  // totals of the first mode
        first = false;
        total_flops += c.count * flops * (stem ? 2 : 3);
        total_seconds += c.count * (fwd + bwd_w + (stem ? 0.0 : bwd_d));
        nostrum_pass[0] += c.count * fwd, nostrum_pass[1] += stem ? 0 : c.count * bwd_d;
        nostrum_pass[2] += c.count * bwd_w;
        first_mode[0] = fwd, first_mode[1] = bwd_d, first_mode[2] = bwd_w;
      }
    if (!opt.onednn) continue;
    // oneDNN: the three primitives created once (not timed), then timed like nostrum's modes.
    using nostrum::kernels::ConvPass;
    using nostrum::kernels::OnednnConv;
    OnednnConv forward(g, ConvPass::kForward, opt.precision),
        backward_data(g, ConvPass::kBackwardData, opt.precision),
        backward_weights(g, ConvPass::kBackwardWeights, opt.precision);
    workspace.resize(std::max({forward.workspace_bytes(), backward_data.workspace_bytes(),
                               backward_weights.workspace_bytes()}) +
                     64);
    void* ws = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
    const double fwd = best_seconds(opt.repeats, [&] { forward.forward(out, in, weight, ws); });
    const double bwd_w = best_seconds(
        opt.repeats, [&] { backward_weights.backward_weights(d_weight, d_out, in, ws); });
    const double bwd_d = best_seconds(
        opt.repeats, [&] { backward_data.backward_data(d_in, d_out, weight, false, ws); });
    const std::string impl = ", \"onednn_impl\": [\"" + forward.implementation() + "\", \"" +
                             backward_data.implementation() + "\", \"" +
                             backward_weights.implementation() + "\"]";
    report(c, "onednn", "onednn", fwd, bwd_d, bwd_w, impl);
    std::printf("    oneDNN %s | %s | %s; workspace %.1f / %.1f / %.1f MB\n",
                forward.implementation().c_str(), backward_data.implementation().c_str(),
                backward_weights.implementation().c_str(), forward.workspace_bytes() / 1e6,
                backward_data.workspace_bytes() / 1e6, backward_weights.workspace_bytes() / 1e6);
    onednn_pass[0] += c.count * fwd, onednn_pass[1] += stem ? 0 : c.count * bwd_d;
    onednn_pass[2] += c.count * bwd_w;
    const double mine[3] = {fwd, bwd_d, bwd_w};
    ++compared;
    for (int p = 0; p < 3; ++p) {
      if (p == 1 && stem) continue;
      faster_pass[p] += c.count * std::min(first_mode[p], mine[p]);
      onednn_wins[p] += mine[p] < first_mode[p];
    }
  }
  std::printf(
      "# all convs of one training step: %.1f GFLOP in %.3f s = %.1f GFLOP/s (%.0f %% of "
      "the ceiling)\n",
      total_flops * 1e-9, total_seconds, total_flops * 1e-9 / total_seconds,
      pct(total_flops * 1e-9 / total_seconds));
  if (opt.onednn) {
    const double nostrum_total = nostrum_pass[0] + nostrum_pass[1] + nostrum_pass[2];
    const double onednn_total = onednn_pass[0] + onednn_pass[1] + onednn_pass[2];
    std::printf(
        "# step seconds, nostrum (first mode) / oneDNN: forward %.3f / %.3f, backward-data %.3f / "
        "%.3f, backward-weights %.3f / %.3f, all %.3f / %.3f (oneDNN/nostrum time %.2f)\n",
        nostrum_pass[0], onednn_pass[0], nostrum_pass[1], onednn_pass[1], nostrum_pass[2],
        onednn_pass[2], nostrum_total, onednn_total, onednn_total / nostrum_total);
    const double faster_total = faster_pass[0] + faster_pass[1] + faster_pass[2];
    std::printf(
        "# the faster of the two conv by conv: forward %.3f, backward-data %.3f, backward-weights "
        "%.3f, all %.3f s (%.2f of nostrum's time); oneDNN faster on %d / %d / %d of %d convs\n",
        faster_pass[0], faster_pass[1], faster_pass[2], faster_total, faster_total / nostrum_total,
        onednn_wins[0], onednn_wins[1], onednn_wins[2], compared);
    std::printf(
        "{\"summary\": \"step\", \"threads\": %d, \"precision\": \"%s\", \"onednn\": \"%s\", "
        "\"onednn_isa\": \"%s\", \"nostrum_s\": [%.4f, %.4f, %.4f], \"onednn_s\": [%.4f, %.4f, "
        "%.4f], \"faster_s\": [%.4f, %.4f, %.4f]}\n",
        omp_get_max_threads(), nostrum::kernels::precision_name(opt.precision),
        nostrum::kernels::onednn_library().version.c_str(),
        nostrum::kernels::onednn_library().isa.c_str(), nostrum_pass[0], nostrum_pass[1],
        nostrum_pass[2], onednn_pass[0], onednn_pass[1], onednn_pass[2], faster_pass[0],
        faster_pass[1], faster_pass[2]);
  }
  return 0;
} catch (const nostrum::Error& e) {
  std::fprintf(stderr, "nostrum-conv-bench: %s\n", e.what());  // what() names where and the hint
  return 2;
}
