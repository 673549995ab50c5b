// Bucket planning: walks the gradient arena from its end, first_bucket_mb then bucket_mb slices.
#include "mpi/bucket_plan.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::mpi {

namespace {

size_t floats_in(double megabytes, const char* option) {
  if (!(megabytes > 0.0) || !std::isfinite(megabytes)) {
    std::ostringstream text;
    text << "bucket size must be a positive number of MB, got " << megabytes;
    throw OptionError(text.str(), option, "e.g. --bucket-mb 25");
  }
  const double floats = std::floor(megabytes * 1e6 / sizeof(float));
  return floats < 1.0 ? 1 : static_cast<size_t>(std::min(floats, 1e18));
}

}  // namespace

std::vector<Bucket> plan_buckets(size_t total, double bucket_mb, double first_bucket_mb) {
  const size_t bucket_floats = floats_in(bucket_mb, "--bucket-mb");
  const size_t first_floats = floats_in(first_bucket_mb, "first bucket size");
  std::vector<Bucket> buckets;
  size_t end = total;  // buckets are cut from the end of the arena towards offset 0
  while (end > 0) {
    const size_t want = buckets.empty() ? first_floats : bucket_floats;
    const size_t count = std::min(want, end);
    buckets.push_back({end - count, count});
    end -= count;
  }
  return buckets;
}

}  // namespace nostrum::mpi
