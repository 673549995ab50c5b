// Aligned arena allocation (eagerly zeroed, or fresh pages zeroed by the OS; large arenas mapped on
// huge pages) and bump-pointer slicing.
#include "nostrum/core/arena.hpp"

#include <cstdlib>
#include <cstring>

#include "nostrum/core/error.hpp"
#include "nostrum/core/page_memory.hpp"

namespace nostrum {

void Arena::FreeDeleter::operator()(float* p) const {
  if (mapped_bytes)
    unmap_pages(PageMapping{p, mapped_bytes});
  else
    std::free(p);
}

Arena::Arena(size_t capacity_floats, std::string name, Zeroing zeroing)
    : capacity_(padded(capacity_floats)), name_(std::move(name)) {
  if (capacity_ == 0) return;
  const size_t bytes = capacity_ * sizeof(float);
  if (zeroing == Zeroing::kOnFirstTouch || bytes >= kHugePageBytes) {
    // Fresh pages from the OS read as 0; large arenas on huge pages (core/page_memory.hpp).
    const PageMapping m = map_pages(bytes, "arena " + name_);
    data_ = std::unique_ptr<float, FreeDeleter>(static_cast<float*>(m.data), FreeDeleter{m.bytes});
    // kEager: every page written now, each thread its share (first touch places it).
    if (zeroing == Zeroing::kEager) zero();
    return;
  }
  void* p = std::aligned_alloc(64, bytes);
  NOSTRUM_CHECK(p != nullptr, Error, "cannot allocate " + std::to_string(bytes >> 20) + " MiB",
                "arena " + name_, "reduce the batch size or the model");
  data_.reset(static_cast<float*>(p));
  zero();
}

float* Arena::take(size_t count, const std::string& what) {
  const size_t n = padded(count);
  NOSTRUM_CHECK(used_ + n <= capacity_, ShapeError,
                "arena overflow taking " + std::to_string(count) + " floats for " + what + " (" +
                    std::to_string(used_) + " of " + std::to_string(capacity_) + " used)",
                "arena " + name_, "size the arena from the same table that takes from it");
  float* p = data_.get() + used_;
  used_ += n;
  return p;
}

void Arena::zero() {
  float* p = data_.get();
  const long long n = static_cast<long long>(capacity_);
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < n; ++i) p[i] = 0.0f;
}

}  // namespace nostrum
