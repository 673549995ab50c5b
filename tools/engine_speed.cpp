// nostrum-engine-speed: times training steps (forward + loss + backward) of one model on synthetic
// data and prints one JSON line; --layers adds a per-layer table on stderr. A quick probe for the
// engine issue; the full benchmark with the optimizer step is nostrum-bench.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "nostrum/kernels/gemm.hpp"
#include "nostrum/model/model.hpp"

namespace {

class LayerTimes final : public nostrum::model::LayerObserver {
 public:
  void on_layer(const std::string& layer, nostrum::model::Phase phase, double t0,
                double t1) override {
    auto& slot = phase == nostrum::model::Phase::kForward ? forward_[layer] : backward_[layer];
    slot += t1 - t0;
    if (std::find(order_.begin(), order_.end(), layer) == order_.end()) order_.push_back(layer);
  }
  void print(int steps) const {
    std::fprintf(stderr, "%-28s %10s %10s\n", "layer", "fwd ms", "bwd ms");
    for (const auto& l : order_) {
      auto f = forward_.find(l), b = backward_.find(l);
      std::fprintf(stderr, "%-28s %10.2f %10.2f\n", l.c_str(),
                   f == forward_.end() ? 0.0 : 1e3 * f->second / steps,
                   b == backward_.end() ? 0.0 : 1e3 * b->second / steps);
    }
  }

 private:
  std::map<std::string, double> forward_, backward_;
  std::vector<std::string> order_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string name = "resnet50";
  int batch = 32, hw = 224, channels = 3, classes = 1000, steps = 3;
  bool layers = false;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* flag) { return std::strcmp(argv[i], flag) == 0 && i + 1 < argc; };
    if (arg("--model"))
      name = argv[++i];
    else if (arg("--batch"))
      batch = std::atoi(argv[++i]);
    else if (arg("--size"))
      hw = std::atoi(argv[++i]);
    else if (arg("--channels"))
      channels = std::atoi(argv[++i]);
    else if (arg("--classes"))
      classes = std::atoi(argv[++i]);
    else if (arg("--steps"))
      steps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--layers") == 0)
      layers = true;
    else {
      std::fprintf(stderr,
                   "usage: nostrum-engine-speed [--model resnet50] [--batch 32] [--size 224] "
                   "[--channels 3] [--classes 1000] [--steps 3] [--layers]\n");
      return 2;
    }
  }
  try {
    nostrum::model::ModelConfig config;
    config.name = name;
    config.num_classes = classes;
    config.in_channels = channels;
    auto model = nostrum::model::Model::create(config);
    model->build(batch, hw, hw);
    model->init(1);
    std::vector<float> images(static_cast<size_t>(batch) * hw * hw * channels);
    for (size_t i = 0; i < images.size(); ++i)
      images[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = i % classes;
    LayerTimes times;
    std::vector<double> step_s;
    for (int s = 0; s < steps + 1; ++s) {
      if (s == 1 && layers) model->set_observer(&times);
      const double t0 = omp_get_wtime();
      model->forward(images.data(), batch, true);
      model->loss(labels.data(), 0.1f, 1.0f / batch);
      model->backward();
      if (s > 0) step_s.push_back(omp_get_wtime() - t0);  // step 0 is warm-up
    }
    std::sort(step_s.begin(), step_s.end());
    const double median = step_s[step_s.size() / 2];
    std::printf(
        "{\"model\": \"%s\", \"image\": \"%dx%dx%d\", \"batch\": %d, \"threads\": %d, "
        "\"images_per_second\": %.3f, \"gflops\": %.1f, \"step_seconds\": %.4f, "
        "\"arena_mb\": %.0f, \"openblas_core\": \"%s\"}\n",
        name.c_str(), hw, hw, channels, batch, omp_get_max_threads(), batch / median,
        model->training_flops_per_image() * batch / median * 1e-9, median,
        (model->activation_bytes() + 2.0 * model->parameter_count() * sizeof(float)) / 1048576.0,
        nostrum::kernels::blas_core_name().c_str());
    if (layers) times.print(steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nostrum-engine-speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
