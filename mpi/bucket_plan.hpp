// BucketPlan: splits one contiguous gradient arena (floats laid out in forward order) into
// allreduce buckets, (offset, count) slices formed from the END of the arena, because backward
// finishes the last layers' gradients first. Bucket 0 is the arena's tail and small (its reduction
// starts as early as possible); the others are ~bucket_mb MB; boundaries may fall inside a tensor.
#pragma once

#include <cstddef>
#include <vector>

namespace nostrum::mpi {

struct Bucket {
  size_t offset = 0;  // first float of the slice in the gradient arena
  size_t count = 0;   // floats in the slice
};

// Buckets in reduction order (bucket 0 = highest offsets). Covers [0, total) exactly, no gaps, no
// overlap, every bucket non-empty. bucket_mb and first_bucket_mb are megabytes (1e6 bytes) of fp32
// and must be > 0; a bucket never holds fewer than one float. Throws OptionError on bad sizes.
std::vector<Bucket> plan_buckets(size_t total, double bucket_mb, double first_bucket_mb);

}  // namespace nostrum::mpi
