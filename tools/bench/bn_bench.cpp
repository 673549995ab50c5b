// nostrum-bn-bench: the batch norm's passes on ResNet-50's bf16 shapes at batch 32 (224 x 224),
// each ISA copy of the row kernels in turn in one process (ScopedElementwiseIsa), so the AVX-512
// copy written in intrinsics is timed against the compiled AVX2 one on the same data. Per shape:
// the training forward (bf16 input and output, with ReLU, or with a bf16 residual and no ReLU as
// a block's last norm), its backward (fp32 output gradient, bf16 input gradient) and the add +
// ReLU backward taking one norm's sums, with the add's partial in 32 pieces as the next conv hands
// it (one buffer of a piece's rows, in cache, as the conv has just written it). Median of
// --repeats calls (default 9) after one warm-up, in ms.
//   nostrum-bn-bench [--threads N] [--repeats R]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nostrum/core/arena.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/layers/batch_norm.hpp"

using namespace nostrum;
namespace L = nostrum::layers;

namespace {

template <typename F>
double median_ms(F&& f, int repeats) {
  f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Shape {
  const char* where;
  int64_t rows;
  int C;
  bool block_end;  // a block's last norm: residual added, no ReLU in this norm's own pass
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "nostrum-bn-bench: unknown option %s\nusage: nostrum-bn-bench [--threads N] "
                   "[--repeats R]\n",
                   a.c_str());
      return 2;
    }
  }
  omp_set_num_threads(threads);
  const Isa top = elementwise_isa();
  std::vector<Isa> copies;
  if (top >= Isa::kAvx2) copies.push_back(Isa::kAvx2);
  if (top >= Isa::kAvx512) copies.push_back(Isa::kAvx512);
  if (copies.empty()) copies.push_back(Isa::kBaseline);
  std::printf("# %s\n# threads %d, median of %d calls, ms\n", cpu_features().describe().c_str(),
              threads, repeats);
  std::printf("# %-22s %7s %5s %-8s %8s %8s %8s\n", "shape", "rows", "C", "copy", "forward",
              "backward", "add_bwd");
  const Shape shapes[] = {
      {"layer1 inner", 100352, 64, false}, {"layer1 block end", 100352, 256, true},
      {"layer2 inner", 25088, 128, false}, {"layer2 block end", 25088, 512, true},
      {"layer3 inner", 6272, 256, false},  {"layer3 block end", 6272, 1024, true},
      {"layer4 inner", 1568, 512, false},  {"layer4 block end", 1568, 2048, true}};
  for (const Shape& s : shapes) {
    const int64_t rows = s.rows;
    const int C = s.C;
    const size_t n = size_t(rows) * C;
    const int64_t piece = std::max<int64_t>(1, rows / 32);
    // The tensors in one arena as the model holds them (64-byte aligned, huge pages where the
    // kernel gives them); a bf16 tensor in float slots, as the model's bf16 activations are.
    const size_t bf16_slots = Arena::padded((n + 1) / 2);
    Arena arena(4 * bf16_slots + 2 * Arena::padded(n) + Arena::padded(size_t(piece) * C),
                "nostrum-bn-bench tensors");
    const auto bf16 = [&](const char* what) {
      return reinterpret_cast<uint16_t*>(arena.take(bf16_slots, what));
    };
    uint16_t *x = bf16("x"), *z = bf16("residual"), *y = bf16("y"), *d_in = bf16("d_in");
    float *dy = arena.take(n, "dy"), *d_sum = arena.take(n, "d_sum"),
          *add = arena.take(size_t(piece) * C, "add");
    for (size_t i = 0; i < n; ++i) {
      x[i] = kernels::fp32_to_bf16(float(int(i * 2654435761u % 2001) - 1000) * 0.003f);
      z[i] = kernels::fp32_to_bf16(float(int(i * 40503u % 1001) - 500) * 0.002f);
      dy[i] = float(int(i * 97u % 201) - 100) * 0.01f;
    }
    for (size_t i = 0; i < size_t(piece) * C; ++i) add[i] = float(int(i * 31u % 101) - 50) * 0.01f;
    std::vector<float> gamma(C, 1.1f), beta(C, 0.1f), mean(C), invstd(C), rm(C, 0.0f), rv(C, 1.0f),
        dg(C), db(C);
    std::vector<double> scratch(L::batch_norm_scratch_doubles(C)),
        sums(L::batch_norm_backward_sums_doubles(C));
    for (Isa copy : copies) {
      ScopedElementwiseIsa scope(copy);
      L::BatchNormOptions f;
      f.in_bf16 = x;
      f.out_bf16 = y;
      f.fuse_relu = true;
      if (s.block_end) f.residual_bf16 = z;
      const double forward = median_ms(
          [&] {
            L::batch_norm_forward_training(nullptr, mean.data(), invstd.data(), rm.data(),
                                           rv.data(), nullptr, gamma.data(), beta.data(), rows, C,
                                           f, scratch.data());
          },
          repeats);
      L::BatchNormOptions b;
      b.in_bf16 = x;
      b.out_bf16 = y;
      b.fuse_relu = !s.block_end;
      b.d_in_bf16 = d_in;
      const double backward = median_ms(
          [&] {
            L::batch_norm_backward(nullptr, dg.data(), db.data(), dy, nullptr, nullptr,
                                   gamma.data(), mean.data(), invstd.data(), rows, C, b,
                                   scratch.data());
          },
          repeats);
      L::NormSumsRequest q;
      q.in_bf16 = x;
      q.save_mean = mean.data();
      q.sums = sums.data();
      const double add_backward = median_ms(
          [&] {
            std::memcpy(d_sum, dy, n * sizeof(float));
            L::AddReluBackward backward(d_sum, nullptr, y, rows, C, &q, 1);
            for (int64_t r0 = 0; r0 < rows; r0 += piece) {
              const int64_t r1 = std::min(rows, r0 + piece);
              backward.finish(add, r0, r1);
            }
          },
          repeats);
      std::printf("  %-22s %7lld %5d %-8s %8.2f %8.2f %8.2f\n", s.where, (long long)rows, C,
                  isa_name(copy), forward, backward, add_backward);
    }
  }
  std::printf("# add_bwd includes a copy of the fp32 gradient (restoring it between calls)\n");
  return 0;
}
