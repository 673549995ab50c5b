// Shape arithmetic and printing.
#include "nostrum/core/tensor.hpp"

#include "nostrum/core/error.hpp"

namespace nostrum {

Shape::Shape(std::initializer_list<int64_t> dims) {
  NOSTRUM_CHECK(dims.size() <= static_cast<size_t>(kMaxRank), ShapeError,
                "shape has " + std::to_string(dims.size()) + " dims, at most 4 supported");
  for (int64_t d : dims) {
    NOSTRUM_CHECK(d >= 0, ShapeError, "negative dimension " + std::to_string(d) + " in shape");
    dims_[rank_++] = d;
  }
}

int64_t Shape::operator[](int axis) const {
  const int a = axis < 0 ? axis + rank_ : axis;
  NOSTRUM_CHECK(a >= 0 && a < rank_, ShapeError,
                "axis " + std::to_string(axis) + " out of range for shape " + str());
  return dims_[a];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
  return s + ")";
}

}  // namespace nostrum
