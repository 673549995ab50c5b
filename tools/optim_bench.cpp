// nostrum-optim-bench: time of one SGD / LARS step over ResNet-50's parameter table (25,557,032
// parameters in 161 tensors, torchvision's shapes), median of 30 steps, and the memory bandwidth it
// reaches. Usage: nostrum-optim-bench [threads]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/parameter.hpp"
#include "nostrum/optim/lars.hpp"
#include "nostrum/optim/sgd.hpp"

using nostrum::Parameter;
using nostrum::ParameterKind;
using nostrum::Shape;

namespace {

// torchvision resnet50's trainable tensors (no buffers), in state_dict order.
std::vector<std::pair<Shape, ParameterKind>> resnet50_shapes() {
  std::vector<std::pair<Shape, ParameterKind>> t;
  auto bn = [&](int64_t c) {
    t.push_back({Shape{c}, ParameterKind::kNormScale});
    t.push_back({Shape{c}, ParameterKind::kNormShift});
  };
  t.push_back({Shape{64, 3, 7, 7}, ParameterKind::kWeight});
  bn(64);
  int64_t in = 64;
  const int blocks[] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = 64 << stage, out = width * 4;
    for (int b = 0; b < blocks[stage]; ++b) {
      t.push_back({Shape{width, in, 1, 1}, ParameterKind::kWeight});
      bn(width);
      t.push_back({Shape{width, width, 3, 3}, ParameterKind::kWeight});
      bn(width);
      t.push_back({Shape{out, width, 1, 1}, ParameterKind::kWeight});
      bn(out);
      if (b == 0) {
        t.push_back({Shape{out, in, 1, 1}, ParameterKind::kWeight});
        bn(out);
      }
      in = out;
    }
  }
  t.push_back({Shape{1000, 2048}, ParameterKind::kWeight});
  t.push_back({Shape{1000}, ParameterKind::kBias});
  return t;
}

template <class Step>
double median_ms(Step step) {
  std::vector<double> ms;
  for (int i = 0; i < 33; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) omp_set_num_threads(std::atoi(argv[1]));
  const auto shapes = resnet50_shapes();
  size_t capacity = 0;
  int64_t count = 0;
  for (const auto& s : shapes) {
    capacity += nostrum::Arena::padded(static_cast<size_t>(s.first.numel()));
    count += s.first.numel();
  }
  nostrum::Arena values(capacity, "parameters"), grads(capacity, "gradients");
  nostrum::ParameterTable table;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Parameter p;
    p.name = "p" + std::to_string(i);
    p.shape = shapes[i].first;
    p.kind = shapes[i].second;
    p.value = values.take(static_cast<size_t>(p.numel()), p.name);
    p.grad = grads.take(static_cast<size_t>(p.numel()), p.name);
    for (int64_t k = 0; k < p.numel(); ++k) {
      p.value[k] = 0.01f * static_cast<float>((k * 7919) % 201 - 100);
      p.grad[k] = 0.001f * static_cast<float>((k * 104729) % 201 - 100);
    }
    table.push_back(p);
  }
  std::printf("resnet50 table: %zu tensors, %lld parameters, %d threads\n", table.size(),
              static_cast<long long>(count), omp_get_max_threads());
  nostrum::optim::Sgd sgd(table, {0.9f, 0.0f, true, 5e-5f, true});
  nostrum::optim::Lars lars(table, {});
  const double bytes = 5.0 * 4.0 * static_cast<double>(count);  // read w, g, m; write w, m
  const double sgd_ms = median_ms([&] { sgd.step(1e-6f); });
  const double lars_ms = median_ms([&] { lars.step(1e-6f); });
  std::printf("sgd  (nesterov, decay) step: %7.2f ms  %6.1f GB/s\n", sgd_ms, bytes / sgd_ms / 1e6);
  std::printf("lars (norms + update) step: %7.2f ms  %6.1f GB/s (update traffic only)\n", lars_ms,
              bytes / lars_ms / 1e6);
  return count == 25557032 ? 0 : 1;
}
