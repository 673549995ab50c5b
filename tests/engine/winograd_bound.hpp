// The magnitudes the Winograd candidate rounds (kernels/winograd_conv.hpp), for its error bound in
// the candidate tests (conv_candidate_check.hpp): it rounds the transformed operands U = G g G^T, V
// = B^T d B and (weight gradient) A dy A^T to bf16, not the operands' products, and its outputs are
// sums of those rounded values through the transforms. So its error is bounded by the bf16 bound
// (conv_candidate_ check.hpp's bf16_bound: each rounded factor within 2^-8 relative of its
// operands' magnitudes, fp32 sums) applied to the sum of |transform| x |rounded factor| x |rounded
// factor| over what the output sums, with every matrix and operand taken by its absolute value: the
// magnitudes of the very values that are rounded, where the direct convolution's bound takes the
// sum of the products' magnitudes (cross terms of a tile's pixels and filter taps included here).
#pragma once

#include <array>
#include <cmath>
#include <vector>

#include "nostrum/kernels/conv_candidate.hpp"

namespace nostrum::testing {

namespace winograd {

using Tile = std::array<double, 16>;  // position xi = 4 * i + j

constexpr double kBt[4][4] = {{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}};  // |B^T|
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0, 0, 1}};   // |G|
constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, 1, 1}};                              // |A^T|

// |B^T| |d| |B| of the 4x4 input tile at (2 ty - 1, 2 tx - 1) of image n, channel c (C channels).
inline Tile input_magnitude(const std::vector<float>& x, int H, int W, int C, int n, int ty, int tx,
                            int c) {
  double d[4][4] = {};
  for (int u = 0; u < 4; ++u)
    for (int v = 0; v < 4; ++v) {
      const int y = 2 * ty - 1 + u, z = 2 * tx - 1 + v;
      if (y >= 0 && y < H && z >= 0 && z < W)
        d[u][v] = std::abs(x[((size_t(n) * H + y) * W + z) * C + c]);
    }
  Tile m{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int u = 0; u < 4; ++u)
        for (int v = 0; v < 4; ++v) m[4 * i + j] += kBt[i][u] * d[u][v] * kBt[j][v];
  return m;
}

// |G| |g| |G^T| of a 3x3 filter g[3 r + s].
inline Tile filter_magnitude(const double g[9]) {
  Tile m{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) m[4 * i + j] += kG[i][r] * std::abs(g[3 * r + s]) * kG[j][s];
  return m;
}

// |A| |dy| |A^T| of the 2x2 gradient block at (2 ty, 2 tx) of image n, channel k (K channels).
inline Tile gradient_magnitude(const std::vector<float>& dy, int H, int W, int K, int n, int ty,
                               int tx, int k) {
  double b[2][2] = {};
  for (int a = 0; a < 2; ++a)
    for (int e = 0; e < 2; ++e) {
      const int y = 2 * ty + a, z = 2 * tx + e;
      if (y < H && z < W) b[a][e] = std::abs(dy[((size_t(n) * H + y) * W + z) * K + k]);
    }
  Tile m{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int a = 0; a < 2; ++a)
        for (int e = 0; e < 2; ++e) m[4 * i + j] += kAt[a][i] * b[a][e] * kAt[e][j];
  return m;
}

// Forward-shaped magnitudes: out (N, H, W, Kout) of the convolution of x (N, H, W, Cin) with the
// filters filter(ko, ci) (3x3 each), as |A^T| (sum over ci of |U| . |V|) |A|.
template <class Filter>
std::vector<double> convolution_magnitudes(const std::vector<float>& x, int N, int H, int W,
                                           int Cin, int Kout, Filter filter) {
  std::vector<Tile> u(size_t(Kout) * Cin);
  for (int ko = 0; ko < Kout; ++ko)
    for (int ci = 0; ci < Cin; ++ci) {
      double g[9];
      filter(ko, ci, g);
      u[size_t(ko) * Cin + ci] = filter_magnitude(g);
    }
  std::vector<double> out(size_t(N) * H * W * Kout, 0.0);
  std::vector<Tile> v(static_cast<size_t>(Cin));
  for (int n = 0; n < N; ++n)
    for (int ty = 0; ty < (H + 1) / 2; ++ty)
      for (int tx = 0; tx < (W + 1) / 2; ++tx) {
        for (int ci = 0; ci < Cin; ++ci)
          v[size_t(ci)] = input_magnitude(x, H, W, Cin, n, ty, tx, ci);
        for (int ko = 0; ko < Kout; ++ko) {
          Tile m{};
          for (int ci = 0; ci < Cin; ++ci)
            for (int xi = 0; xi < 16; ++xi)
              m[size_t(xi)] += u[size_t(ko) * Cin + ci][size_t(xi)] * v[size_t(ci)][size_t(xi)];
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
              const int y = 2 * ty + a, z = 2 * tx + b;
              if (y >= H || z >= W) continue;
              double s = 0;
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) s += kAt[a][i] * m[size_t(4 * i + j)] * kAt[b][j];
              out[((size_t(n) * H + y) * W + z) * Kout + ko] = s;
            }
        }
      }
  return out;
}

}  // namespace winograd

// The magnitudes of one pass's outputs (abs_sum's place in the bound) for the geometry's tensors:
// in (N, H, W, C), weight (K, C, 3, 3), d_out (N, H, W, K).
inline std::vector<double> winograd_magnitudes(const kernels::ConvGeometry& g,
                                               kernels::ConvPass pass, const std::vector<float>& in,
                                               const std::vector<float>& weight,
                                               const std::vector<float>& d_out) {
  switch (pass) {
    case kernels::ConvPass::kForward:
      return winograd::convolution_magnitudes(
          in, g.N, g.H, g.W, g.C, g.K, [&](int k, int c, double f[9]) {
            for (int i = 0; i < 9; ++i) f[i] = weight[(size_t(k) * g.C + c) * 9 + size_t(i)];
          });
    case kernels::ConvPass::kBackwardData:
      // The output gradient convolved with the filters turned by 180 degrees, channels swapped.
      return winograd::convolution_magnitudes(
          d_out, g.N, g.H, g.W, g.K, g.C, [&](int c, int k, double f[9]) {
            for (int i = 0; i < 9; ++i) f[i] = weight[(size_t(k) * g.C + c) * 9 + size_t(8 - i)];
          });
    case kernels::ConvPass::kBackwardWeights:
      break;
  }
  // The weight gradient: |G^T| (sum over tiles of |A dy A^T| . |V|) |G|.
  const int ty_count = (g.H + 1) / 2, tx_count = (g.W + 1) / 2;
  std::vector<winograd::Tile> du(size_t(g.K) * g.C, winograd::Tile{});
  std::vector<winograd::Tile> v(size_t(g.C)), w(size_t(g.K));
  for (int n = 0; n < g.N; ++n)
    for (int ty = 0; ty < ty_count; ++ty)
      for (int tx = 0; tx < tx_count; ++tx) {
        for (int c = 0; c < g.C; ++c)
          v[size_t(c)] = winograd::input_magnitude(in, g.H, g.W, g.C, n, ty, tx, c);
        for (int k = 0; k < g.K; ++k)
          w[size_t(k)] = winograd::gradient_magnitude(d_out, g.H, g.W, g.K, n, ty, tx, k);
        for (int k = 0; k < g.K; ++k)
          for (int c = 0; c < g.C; ++c)
            for (int xi = 0; xi < 16; ++xi)
              du[size_t(k) * g.C + c][size_t(xi)] +=
                  w[size_t(k)][size_t(xi)] * v[size_t(c)][size_t(xi)];
      }
  std::vector<double> out(size_t(g.K) * g.C * 9, 0.0);
  for (int k = 0; k < g.K; ++k)
    for (int c = 0; c < g.C; ++c)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) {
          double sum = 0;
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
              sum += winograd::kG[i][r] * du[size_t(k) * g.C + c][size_t(4 * i + j)] *
                     winograd::kG[j][s];
          out[(size_t(k) * g.C + c) * 9 + size_t(3 * r + s)] = sum;
        }
  return out;
}

}  // namespace nostrum::testing
