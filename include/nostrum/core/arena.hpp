// Arena: one 64-byte-aligned float allocation made up front, handed out in aligned slices by a bump
// pointer. Parameters, gradients, optimizer state, activations and scratch each live in one arena,
// so the optimizer is one loop, an allreduce is a slice and a checkpoint is one write.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace nostrum {

class Arena {
 public:
  static constexpr size_t kAlignFloats = 16;  // 64 bytes: one cache line, one AVX-512 register

  // Rounds a slice length up so that every slice starts on a 64-byte boundary.
  static size_t padded(size_t count) {
    return (count + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }

  // How the memory comes zeroed. kEager: written with 0 at construction (OpenMP-parallel, so
  // each thread's share is first touched by it). kOnFirstTouch: fresh pages from the OS, which
  // read as 0 and take physical memory only where first written, so what a run never touches
  // costs nothing (the activation arena, whose bf16 tensors fill half their fp32 slots).
  // Either way an arena of 2 MiB or more is mapped on 2 MiB boundaries and advised for
  // transparent huge pages (core/page_memory.hpp; NOSTRUM_HUGE_PAGES=0 turns that off).
  enum class Zeroing { kEager, kOnFirstTouch };

  Arena() = default;
  Arena(size_t capacity_floats, std::string name, Zeroing zeroing = Zeroing::kEager);
  Arena(Arena&&) noexcept = default;
  Arena& operator=(Arena&&) noexcept = default;

  // Next `count` floats; throws ShapeError naming the arena and `what` if it would overflow.
  float* take(size_t count, const std::string& what);
  // Offset of a pointer handed out by take() (for bucket (offset, count) slices).
  size_t offset_of(const float* p) const { return static_cast<size_t>(p - data_.get()); }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }
  void zero();  // sets the whole arena to 0 (OpenMP-parallel)

 private:
  struct FreeDeleter {
    FreeDeleter() noexcept : mapped_bytes(0) {}
    explicit FreeDeleter(size_t bytes) noexcept : mapped_bytes(bytes) {}
    size_t mapped_bytes;  // a mapping's length (unmap_pages), else 0 (free)
    void operator()(float* p) const;
  };
  std::unique_ptr<float, FreeDeleter> data_;
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::string name_;
};

}  // namespace nostrum
