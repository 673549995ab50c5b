// The threads' shares of a list of work items of known sizes (a kernel's output pixels or taps),
// decided once when the kernel is prepared.
#pragma once

#include <cstdint>
#include <vector>

namespace nostrum::kernels {

// Which of `threads` threads (at least 1) computes each item of work w (w[i] > 0, e.g. item i's
// GEMM count): the contiguous cut (even shares of the sum, in order), unless a balanced assignment
// leaves the most loaded thread a twentieth less work or more. The cut keeps neighbours together
// (a pixel-taps thread's output pixels read overlapping input rows, which stay in its cache); the
// balanced one takes the largest item first, each to the thread with the least work so far (the
// lowest on a tie), then, while swapping an item of the most loaded thread with one of the least
// loaded lowers the larger of the two, makes the swap that lowers it most. The cut can leave a
// thread a sixth more than its share (a 3x3 weight gradient on 4x4: taps of 9, 12, 9, 12, 16, 12,
// 9, 12, 9 GEMM rows cut 58 : 42); the balanced one leaves 51 : 49. Where each item's sums are
// one thread's, whichever thread, no bits depend on the assignment. Each swap round looks at every
// pair of items: meant for the tens of groups a small-map kernel splits, once at prepare.
std::vector<int> thread_owners(const std::vector<int>& w, int threads);

}  // namespace nostrum::kernels
