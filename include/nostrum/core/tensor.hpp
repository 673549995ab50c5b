// Shape: up to 4 dims, row-major (activations are NHWC, parameters in PyTorch's layout). No tensor
// type owns memory: arenas do (core/arena.hpp), allocated once before the first step.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace nostrum {

class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  int rank() const { return rank_; }
  int64_t operator[](int axis) const;  // bounds-checked; negative axes count from the end
  int64_t numel() const;               // product of dims (1 for rank 0)
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "(32, 56, 56, 64)"

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace nostrum
