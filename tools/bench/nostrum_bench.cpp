// nostrum-bench: times whole training steps (forward, loss, backward, SGD update) of one model on
// synthetic data and prints one JSON line; --layers adds a per-layer profile (forward,
// backward-data, backward-weights: ms, GFLOP/s, share of the step) as '#' lines before it.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/blas_kernels.hpp"
#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/precision_choice.hpp"
#include "nostrum/model/model.hpp"
#include "nostrum/optim/sgd.hpp"

namespace {

struct Options {
  std::string model = "resnet50";
  int height = 224, width = 224, channels = 3;
  int batch = 32, threads = 0, steps = 5, warmup = 1, classes = 0;
  bool layers = false;
  nostrum::kernels::Precision precision = nostrum::kernels::Precision::kFp32;
  std::string precision_text = "fp32";             // --precision as given (auto resolved by parse)
  std::string precision_note;                      // --precision auto: the probes and the choice
  std::string conv_kernel = "cached", conv_cache;  // as nostrum-train's --conv-kernel, --conv-cache
  bool verbose = false;                            // the conv kernel table on stderr
  std::string bf16_handover = "on";       // on | off | ab (Model::set_bf16_handover, alternated)
  std::string bf16_block_outputs = "on";  // on | off | ab (Model::set_bf16_block_outputs)
  std::string bf16_conv_outputs = "on";   // on | off | ab (Model::set_bf16_conv_outputs)
};

const char* kUsage =
    "usage: nostrum-bench --model M --image HxWxC --batch N --threads T [--steps K] [--warmup W]\n"
    "                     [--classes K] [--layers] [--precision fp32|bf16|auto]\n"
    "                     [--conv-kernel measure|cached|fixed|NAME] [--conv-cache FILE|none]\n"
    "                     [--verbose] [--bf16-handover on|off|ab]\n"
    "                     [--bf16-block-outputs on|off|ab] [--bf16-conv-outputs on|off|ab]\n"
    "  Times K training steps (forward, loss, backward, SGD-momentum update) after W warm-up\n"
    "  steps on synthetic data; images_per_second is batch / median step time. --classes defaults\n"
    "  to 1000 for the ImageNet ResNets and 10 for the CIFAR-style ones. --precision bf16: convs\n"
    "  and the classifier on bf16 operands with fp32 sums (x86-64 AVX512_BF16 only); auto: bf16\n"
    "  where its register probe is at least 1.3x the fp32 FMA probe on this CPU, else fp32\n"
    "  (printed; always fp32 on aarch64).\n"
    "  --conv-kernel, --conv-cache: each conv pass's kernel, as nostrum-train's (default cached);\n"
    "  the measurement is not part of the step times; --verbose prints its table on stderr.\n"
    "  --bf16-handover: bf16 output gradients handed from the batch norms to the convs that\n"
    "  take them (on, the default) or rounded in each pass (off); ab alternates the two step by\n"
    "  step in this process and adds images_per_second_handover_off (an A/B on a busy host).\n"
    "  --bf16-block-outputs: the residual stream in bf16 (on, the default; it changes the values,\n"
    "  as PyTorch's autocast does) or fp32 (off); ab as above, adding\n"
    "  images_per_second_block_outputs_off. --bf16-conv-outputs: the conv outputs that a bf16\n"
    "  kernel writes in bf16 kept so for the batch norm after it (on, the default; a numerics\n"
    "  change too) or fp32 (off); ab adds images_per_second_conv_outputs_off. One switch at a\n"
    "  time may be ab.\n";

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      NOSTRUM_CHECK(i + 1 < argc, nostrum::OptionError, "missing value", a, kUsage);
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      try {
        size_t used = 0;
        const int x = std::stoi(v, &used);
        if (used == v.size() && x >= 0) return x;
      } catch (const std::exception&) {
      }
      throw nostrum::OptionError("'" + v + "' is not a non-negative integer", a, kUsage);
    };
    auto on_off_ab = [&](const std::string& v) {
      NOSTRUM_CHECK(v == "on" || v == "off" || v == "ab", nostrum::OptionError,
                    "'" + v + "' is not on, off or ab", a, kUsage);
      return v;
    };
    if (a == "--model") {
      o.model = value();
    } else if (a == "--image") {
      const std::string v = value();
      if (std::sscanf(v.c_str(), "%dx%dx%d", &o.height, &o.width, &o.channels) != 3 ||
          o.height <= 0 || o.width <= 0 || o.channels <= 0)
        throw nostrum::OptionError("'" + v + "' is not HxWxC (e.g. 224x224x3)", a, kUsage);
    } else if (a == "--batch") {
      o.batch = number(value());
    } else if (a == "--threads") {
      o.threads = number(value());
    } else if (a == "--steps") {
      o.steps = number(value());
    } else if (a == "--warmup") {
      o.warmup = number(value());
    } else if (a == "--classes") {
      o.classes = number(value());
    } else if (a == "--precision") {
      o.precision_text = value();
    } else if (a == "--conv-kernel") {
      o.conv_kernel = value();
    } else if (a == "--conv-cache") {
      o.conv_cache = value();
    } else if (a == "--bf16-handover") {
      o.bf16_handover = on_off_ab(value());
    } else if (a == "--bf16-block-outputs") {
      o.bf16_block_outputs = on_off_ab(value());
    } else if (a == "--bf16-conv-outputs") {
      o.bf16_conv_outputs = on_off_ab(value());
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--layers") {
      o.layers = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw nostrum::OptionError("unknown option", a, kUsage);
    }
  }
  NOSTRUM_CHECK(o.batch > 0 && o.steps > 0, nostrum::OptionError,
                "--batch and --steps must be positive", "options", kUsage);
  const int abs =
      (o.bf16_handover == "ab") + (o.bf16_block_outputs == "ab") + (o.bf16_conv_outputs == "ab");
  NOSTRUM_CHECK(!(o.layers && abs > 0), nostrum::OptionError,
                "--layers profiles one configuration: not with an ab switch", "--layers", kUsage);
  NOSTRUM_CHECK(abs <= 1, nostrum::OptionError,
                "one A/B at a time: more than one of --bf16-handover, --bf16-block-outputs and "
                "--bf16-conv-outputs is ab",
                "--bf16-handover, --bf16-block-outputs, --bf16-conv-outputs", kUsage);
  // After every option: auto counts the AMX tile probe only where --conv-kernel can reach tiles.
  const std::string amx_obstacle =
      o.precision_text == "auto"
          ? nostrum::kernels::conv_request_amx_obstacle(
                nostrum::kernels::conv_kernel_request(o.conv_kernel, o.conv_cache, "--conv-kernel"))
          : "";
  o.precision = nostrum::kernels::precision_from_option(o.precision_text, "--precision",
                                                        &o.precision_note, amx_obstacle);
  return o;
}

// Sums each layer's time per phase over the timed steps, in the order layers first ran.
class LayerProfile final : public nostrum::model::LayerObserver {
 public:
  void on_layer(const std::string& layer, nostrum::model::Phase phase, double t0,
                double t1) override {
    auto it = index_.find(layer);
    if (it == index_.end()) {
      it = index_.emplace(layer, rows_.size()).first;
      rows_.push_back({layer, {0.0, 0.0, 0.0}});
    }
    rows_[it->second].seconds[int(phase)] += t1 - t0;
  }

  // '#' lines: per layer ms per step and GFLOP/s of forward, backward-data, backward-weights.
  void print(const nostrum::model::Model& model, int steps, int batch, double step_s) const {
    std::printf("# %-26s %9s %7s %9s %7s %9s %7s %6s\n", "layer", "fwd ms", "GF/s", "bwd-d ms",
                "GF/s", "bwd-w ms", "GF/s", "step%");
    double covered = 0.0;
    for (const auto& r : rows_) {
      const double flops = model.layer_flops_per_image(r.layer) * batch;
      double ms[3], total = 0.0;
      for (int p = 0; p < 3; ++p) {
        ms[p] = 1e3 * r.seconds[p] / steps;
        total += r.seconds[p] / steps;
      }
      covered += total;
      auto rate = [&](double t_ms) { return flops > 0 && t_ms > 0 ? flops / (t_ms * 1e6) : 0.0; };
      std::printf("# %-26s %9.2f %7.1f %9.2f %7.1f %9.2f %7.1f %6.2f\n", r.layer.c_str(), ms[0],
                  rate(ms[0]), ms[1], rate(ms[1]), ms[2], rate(ms[2]), 100.0 * total / step_s);
    }
    std::printf("# layers cover %.1f %% of the step (the rest: loss, optimizer update)\n",
                100.0 * covered / step_s);
  }

 private:
  struct Row {
    std::string layer;
    double seconds[3];
  };
  std::map<std::string, size_t> index_;
  std::vector<Row> rows_;
};

}  // namespace

int main(int argc, char** argv) try {
  nostrum::kernels::select_blas_kernels(argv);  // as nostrum-train: may re-exec (AVX-512)
  const Options opt = parse(argc, argv);
  const nostrum::CpuFeatures& cpu =
      nostrum::cpu_features();  // an unknown NOSTRUM_MAX_ISA stops here
  if (!cpu.max_isa.empty()) std::fprintf(stderr, "nostrum-bench: CPU %s\n", cpu.describe().c_str());
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  const int threads = omp_get_max_threads();
  if (!opt.precision_note.empty())
    std::fprintf(stderr, "nostrum-bench: %s\n", opt.precision_note.c_str());

  nostrum::model::ModelConfig config;
  config.name = opt.model;
  config.in_channels = opt.channels;
  config.precision = opt.precision;
  auto spec = nostrum::model::resnet_spec(config);  // validates the name
  config.num_classes = opt.classes > 0 ? opt.classes : (spec.imagenet_stem ? 1000 : 10);
  auto model = nostrum::model::Model::create(config);
  model->build(opt.batch, opt.height, opt.width);
  // The bf16 switches first: the conv measurement times each kernel on the operands they give it
  // (an ab switch measures as on).
  model->set_bf16_handover(opt.bf16_handover != "off");
  model->set_bf16_block_outputs(opt.bf16_block_outputs != "off");
  model->set_bf16_conv_outputs(opt.bf16_conv_outputs != "off");
  // The conv kernels, chosen as nostrum-train chooses them (its rank 0's part).
  std::vector<std::string> notes;
  const nostrum::kernels::ConvChoiceTable table = nostrum::kernels::select_conv_kernels(
      model->conv_pass_shapes(), opt.precision, threads,
      nostrum::kernels::conv_kernel_request(opt.conv_kernel, opt.conv_cache, "--conv-kernel"),
      &notes, model->activation_memory(), model->activation_memory_floats());
  model->set_conv_kernels(table);
  for (const std::string& n : notes) std::fprintf(stderr, "nostrum-bench: note: %s\n", n.c_str());
  if (opt.verbose)
    for (const std::string& row : nostrum::kernels::describe_conv_choices(table))
      std::fprintf(stderr, "nostrum-bench: %s\n", row.c_str());
  std::map<std::string, int> chosen;  // candidate -> passes
  int measured = 0;
  for (const auto& row : table.rows) {
    ++chosen[row.chosen];
    measured += row.source == nostrum::kernels::ConvChoiceSource::kMeasured;
  }
  std::string chosen_json;
  for (const auto& [name, count] : chosen)
    chosen_json += (chosen_json.empty() ? "\"" : ", \"") + name + "\": " + std::to_string(count);
  model->init(1);
  nostrum::optim::SgdOptions sgd_options;
  sgd_options.momentum = 0.9f;
  sgd_options.weight_decay = 5e-5f;
  nostrum::optim::Sgd sgd(model->parameters(), sgd_options);

  std::vector<float> images(size_t(opt.batch) * opt.height * opt.width * opt.channels);
  std::vector<int32_t> labels(opt.batch);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : images) x = normal(rng);
  for (int i = 0; i < opt.batch; ++i) labels[i] = int32_t(rng() % config.num_classes);

  LayerProfile profile;
  std::vector<double> step_s, off_step_s;  // off: the hand-over's off steps of an ab run
  double loss = 0.0;
  // An ab switch: its name in the JSON and what it sets.
  const char* ab_name = opt.bf16_handover == "ab"        ? "handover"
                        : opt.bf16_block_outputs == "ab" ? "block_outputs"
                        : opt.bf16_conv_outputs == "ab"  ? "conv_outputs"
                                                         : nullptr;
  const bool ab = ab_name != nullptr;
  const auto set_ab = [&](bool on) {
    if (opt.bf16_handover == "ab") model->set_bf16_handover(on);
    if (opt.bf16_block_outputs == "ab") model->set_bf16_block_outputs(on);
    if (opt.bf16_conv_outputs == "ab") model->set_bf16_conv_outputs(on);
  };
  const int handover_convs = model->bf16_gradient_convs();
  const int input_convs = model->bf16_input_convs();
  const int block_outputs = model->bf16_block_outputs();
  const int conv_outputs = model->bf16_conv_outputs();
  for (int s = 0; s < opt.warmup + opt.steps * (ab ? 2 : 1); ++s) {
    if (s == opt.warmup && opt.layers) model->set_observer(&profile);
    const bool off_step = ab && s % 2 == 1;
    if (ab) set_ab(!off_step);
    const double t0 = omp_get_wtime();
    model->forward(images.data(), opt.batch, true);
    loss = model->loss(labels.data(), 0.1f, 1.0f / opt.batch);
    model->backward();
    sgd.step(0.01f);
    if (s >= opt.warmup) (off_step ? off_step_s : step_s).push_back(omp_get_wtime() - t0);
  }
  const auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double median = median_of(step_s);
  std::string ab_json;
  if (ab)
    ab_json = std::string(", \"images_per_second_") + ab_name +
              "_off\": " + std::to_string(opt.batch / median_of(off_step_s));
  if (opt.layers) {
    double mean = 0.0;
    for (double t : step_s) mean += t / step_s.size();
    profile.print(*model, opt.steps, opt.batch, mean);
  }
  const char* dnnl =
      std::getenv("DNNL_MAX_CPU_ISA");  // what oneDNN reads (the cap's or the user's)
  std::printf(
      "{\"model\": \"%s\", \"image\": \"%dx%dx%d\", \"batch\": %d, \"threads\": %d, "
      "\"images_per_second\": %.3f, \"gflops\": %.2f, \"peak_rss_mb\": %.0f, "
      "\"openblas_core\": \"%s\", \"step_seconds\": %.4f, \"steps\": %d, \"loss\": %.4f, "
      "\"precision\": \"%s\", \"max_isa\": \"%s\", \"dnnl_max_cpu_isa\": \"%s\", "
      "\"kernels_ran\": \"%s\", \"conv_kernel\": \"%s\", \"conv_kernels\": {%s}, "
      "\"conv_passes\": %zu, \"conv_measured\": %d, \"conv_measure_seconds\": %.2f, "
      "\"bf16_handover_convs\": %d, \"bf16_input_convs\": %d, \"bf16_block_outputs\": %d, "
      "\"bf16_conv_outputs\": %d, \"huge_pages\": %s, \"anon_huge_pages_mb\": %.0f%s}\n",
      opt.model.c_str(), opt.height, opt.width, opt.channels, opt.batch, threads,
      opt.batch / median, model->training_flops_per_image() * opt.batch / median * 1e-9,
      nostrum::peak_rss_bytes() / 1048576.0, nostrum::kernels::blas_core_name().c_str(), median,
      opt.steps, loss, nostrum::kernels::precision_name(opt.precision),
      cpu.max_isa.empty() ? "none" : cpu.max_isa.c_str(), dnnl ? dnnl : "",
      nostrum::describe_dispatches_ran().c_str(), opt.conv_kernel.c_str(), chosen_json.c_str(),
      table.rows.size(), measured, table.measure_seconds, handover_convs, input_convs,
      block_outputs, conv_outputs, nostrum::huge_pages_wanted() ? "true" : "false",
      nostrum::anon_huge_page_bytes() / 1048576.0, ab_json.c_str());
  return 0;
} catch (const nostrum::Error& e) {
  std::fprintf(stderr, "nostrum-bench: %s\n", e.what());
  return 2;
}
