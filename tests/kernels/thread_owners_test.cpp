// The threads' shares of a kernel's work items (kernels/thread_owners.hpp): the pixel-taps
// weight gradient's taps and forward's pixels balanced where the contiguous cut is not, the cut
// kept where it is as good or nearly, every item owned by one valid thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "nostrum/kernels/thread_owners.hpp"

using nostrum::kernels::thread_owners;

namespace {

// Each thread's summed work under an assignment; every owner must be a thread.
std::vector<int64_t> loads(const std::vector<int>& w, const std::vector<int>& owner, int threads) {
  REQUIRE(owner.size() == w.size());
  std::vector<int64_t> load(size_t(threads), 0);
  for (size_t i = 0; i < w.size(); ++i) {
    REQUIRE(owner[i] >= 0);
    REQUIRE(owner[i] < threads);
    load[size_t(owner[i])] += w[i];
  }
  return load;
}

}  // namespace

TEST_CASE("thread owners: a 3x3 weight gradient's taps on 4x4 and on 2x2 split evenly") {
  // GEMM rows a tap (a 3x3 pad-1 kernel's taps over a 4x4 map): the contiguous cut is 58 : 42.
  const std::vector<int> taps4{9, 12, 9, 12, 16, 12, 9, 12, 9};
  CHECK(loads(taps4, thread_owners(taps4, 2), 2) == std::vector<int64_t>{49, 51});
  const std::vector<int> taps2{1, 2, 1, 2, 4, 2, 1, 2, 1};  // on 2x2: cut 10 : 6
  CHECK(loads(taps2, thread_owners(taps2, 2), 2) == std::vector<int64_t>{8, 8});
  // A stride-2 forward's output pixels on 2x2 (4, 6, 6 and 9 taps inside the image): cut 16 : 9.
  const std::vector<int> pixels{4, 6, 6, 9};
  const std::vector<int64_t> l = loads(pixels, thread_owners(pixels, 2), 2);
  CHECK(*std::max_element(l.begin(), l.end()) == 13);
}

TEST_CASE("thread owners: the contiguous cut where it is as even or nearly") {
  const std::vector<int> even{4, 6, 6, 9, 9, 6, 6, 4};  // 25 : 25 in order
  CHECK(thread_owners(even, 2) == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  // 7 items on 3 threads: the cut starts a share where the sum so far reaches 7 * t / 3 rounded
  // down (2, 4): 2, 2, 3 items; balanced, the most is 3 all the same.
  const std::vector<int> ones(7, 1);
  CHECK(thread_owners(ones, 3) == std::vector<int>{0, 0, 1, 1, 2, 2, 2});
  // Cut 23 : 17, balanced 22 : 18: less than a twentieth off, so the neighbours stay together.
  CHECK(thread_owners({6, 8, 9, 9, 8}, 2) == std::vector<int>{0, 0, 0, 1, 1});
}

TEST_CASE("thread owners: one thread, more threads than items, no items") {
  const std::vector<int> w{3, 1, 2};
  CHECK(thread_owners(w, 1) == std::vector<int>{0, 0, 0});
  CHECK(thread_owners(w, 0) == std::vector<int>{0, 0, 0});  // taken as one thread
  const std::vector<int64_t> many = loads(w, thread_owners(w, 5), 5);
  CHECK(*std::max_element(many.begin(), many.end()) == 3);  // each item a thread of its own
  CHECK(thread_owners({}, 4).empty());
}

TEST_CASE("thread owners: the most loaded thread within one item of the even share") {
  // Pseudo-random item lists (a fixed linear congruential sequence) on 2 to 8 threads: every
  // owner valid, and the largest load between the even share and the even share (rounded up) plus
  // the largest item, a bound both the cut and the balanced assignment keep.
  uint32_t x = 12345;
  for (int trial = 0; trial < 300; ++trial) {
    x = x * 1664525u + 1013904223u;
    const int n = 1 + int(x >> 26);  // 1..64 items
    const int threads = 2 + int((x >> 8) % 7);
    std::vector<int> w;
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      w.push_back(1 + int((x >> 16) % 16));
      total += w.back();
    }
    const int64_t largest = *std::max_element(w.begin(), w.end());
    const std::vector<int64_t> l = loads(w, thread_owners(w, threads), threads);
    const int64_t most = *std::max_element(l.begin(), l.end());
    CHECK(most <= (total + threads - 1) / threads + largest);
    CHECK(most * threads >= total);
  }
}
