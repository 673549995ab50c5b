// Test helpers: seeded random tensors and a central finite-difference gradient check, shared by the
// layer tests. The loss is a fixed random weighting of the outputs, summed in double.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace nostrum::testing {

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// sum_i w_i y_i in double: the scalar whose gradient wrt y is w.
inline double weighted_sum(const std::vector<float>& y, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

// Compares analytic[i] with (loss(x + h e_i) - loss(x - h e_i)) / 2h for every i not skipped; a
// NaN on either side is a mismatch. Returns the number of entries checked. x is restored.
inline int check_gradient(const char* what, std::vector<float>& x,
                          const std::vector<float>& analytic, const std::function<double()>& loss,
                          float step = 1e-2f, double tolerance = 1e-2,
                          const std::function<bool(size_t)>& skip = {}) {
  REQUIRE(x.size() == analytic.size());
  int checked = 0, bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (skip && skip(i)) continue;
    const float saved = x[i];
    x[i] = saved + step;
    const double plus = loss();
    x[i] = saved - step;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * step);
    const double err = std::abs(numeric - analytic[i]);
    if (!(err <= tolerance * std::max(1.0, std::abs(numeric)))) {
      if (bad++ < 5)
        UNSCOPED_INFO(what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric);
    }
    ++checked;
  }
  CHECK(bad == 0);
  return checked;
}

}  // namespace nostrum::testing
