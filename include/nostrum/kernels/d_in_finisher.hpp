// What finishes a backward-data pass's input gradient once its rows hold their whole sum: the
// model's residual add + ReLU backward (with its norms' first pass) on a block output's gradient,
// which the next block's first conv adds onto last. A conv kernel that adds its data gradient
// through a partial (oneDNN's: PreparedConv::finishes_d_in) hands each partial to the finisher
// instead of adding it itself, so the add, the mask and the sums are one pass over rows in cache;
// any other kernel's rows are finished in one call after its run (run_and_finish_d_in).
#pragma once

#include <cstdint>

namespace nostrum::kernels {

class DInFinisher {
 public:
  virtual ~DInFinisher() = default;
  // Rows [r0, r1) of d_in (NHWC: a row is one pixel's C floats, image n's rows n*H*W onwards), r0
  // where the previous call ended (0 the first time), r1 <= rows(): add (r1 - r0 rows, or null) is
  // added onto them, then they are finished. Called outside any OpenMP region; may use the pool.
  virtual void finish(const float* add, int64_t r0, int64_t r1) = 0;
  // Rows of the whole d_in: every call of a pass together covers [0, rows()) in order.
  virtual int64_t rows() const = 0;
};

}  // namespace nostrum::kernels
