// Aligned arena allocation (eagerly zeroed, or fresh pages zeroed by the OS) and bump-pointer
// slicing.
#include "nostrum/core/arena.hpp"

#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "nostrum/core/error.hpp"

namespace nostrum {

void Arena::FreeDeleter::operator()(float* p) const {
  if (mapped_bytes)
    munmap(p, mapped_bytes);
  else
    std::free(p);
}

Arena::Arena(size_t capacity_floats, std::string name, Zeroing zeroing)
    : capacity_(padded(capacity_floats)), name_(std::move(name)) {
  if (capacity_ == 0) return;
  if (zeroing == Zeroing::kOnFirstTouch) {
    // Anonymous pages are zero and page-aligned (a multiple of 64 bytes).
    const size_t bytes = capacity_ * sizeof(float);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    NOSTRUM_CHECK(p != MAP_FAILED, Error, "cannot map " + std::to_string(bytes >> 20) + " MiB",
                  "arena " + name_, "reduce the batch size or the model");
    data_ = std::unique_ptr<float, FreeDeleter>(static_cast<float*>(p), FreeDeleter{bytes});
    return;
  }
  void* p = std::aligned_alloc(64, capacity_ * sizeof(float));
  NOSTRUM_CHECK(p != nullptr, Error,
                "cannot allocate " + std::to_string(capacity_ * sizeof(float) >> 20) + " MiB",
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
