// The threads' shares of a list of work items (thread_owners.hpp).
#include "nostrum/kernels/thread_owners.hpp"

#include <algorithm>
#include <cstddef>

namespace nostrum::kernels {

std::vector<int> thread_owners(const std::vector<int>& w, int threads) {
  const size_t n = w.size();
  const int parts = std::max(1, threads);
  std::vector<int> cut(n, 0);
  std::vector<int64_t> cut_load(size_t(parts), 0);
  int64_t total = 0;
  for (int x : w) total += x;
  int64_t sum = 0;
  for (size_t i = 0, part = 0; i < n; ++i) {
    while (part + 1 < size_t(parts) && sum >= total * int64_t(part + 1) / parts) ++part;
    cut[i] = int(part), cut_load[part] += w[i], sum += w[i];
  }
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return w[size_t(a)] > w[size_t(b)]; });
  std::vector<int64_t> load(size_t(parts), 0);
  std::vector<int> owner(n, 0);
  for (int i : order) {
    const size_t least = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    owner[size_t(i)] = int(least);
    load[least] += w[size_t(i)];
  }
  for (;;) {  // each swap lowers the sum of squared loads: this ends
    const int hi = int(std::max_element(load.begin(), load.end()) - load.begin());
    const int lo = int(std::min_element(load.begin(), load.end()) - load.begin());
    int64_t best = load[size_t(hi)];
    size_t bi = n, bj = n;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (owner[i] == hi && owner[j] == lo && w[i] > w[j]) {
          const int64_t d = w[i] - w[j];
          const int64_t larger = std::max(load[size_t(hi)] - d, load[size_t(lo)] + d);
          if (larger < best) best = larger, bi = i, bj = j;
        }
    if (bi == n) break;
    const int64_t d = w[bi] - w[bj];
    load[size_t(hi)] -= d, load[size_t(lo)] += d;
    owner[bi] = lo, owner[bj] = hi;
  }
  const auto most = [](const std::vector<int64_t>& l) {
    return *std::max_element(l.begin(), l.end());
  };
  // The balanced one only where it takes a twentieth or more off the most loaded thread.
  return most(load) * 20 <= most(cut_load) * 19 ? owner : cut;
}

}  // namespace nostrum::kernels
