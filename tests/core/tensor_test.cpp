// Shape: construction, indexing, numel, comparison, errors.
#include <catch2/catch.hpp>

#include "nostrum/core/error.hpp"
#include "nostrum/core/tensor.hpp"

using nostrum::Shape;

TEST_CASE("shape holds dims, counts elements and prints", "[core]") {
  Shape s{32, 56, 56, 64};
  CHECK(s.rank() == 4);
  CHECK(s[0] == 32);
  CHECK(s[-1] == 64);
  CHECK(s.numel() == 32LL * 56 * 56 * 64);
  CHECK(s.str() == "(32, 56, 56, 64)");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{3, 0}.numel() == 0);
  CHECK(s == Shape{32, 56, 56, 64});
  CHECK(s != Shape{32, 56, 64, 56});
  CHECK(Shape{2} != Shape{2, 1});
}

TEST_CASE("shape rejects bad dims and axes with a ShapeError", "[core]") {
  CHECK_THROWS_AS((Shape{1, 2, 3, 4, 5}), nostrum::ShapeError);
  CHECK_THROWS_AS((Shape{2, -1}), nostrum::ShapeError);
  Shape s{2, 3};
  CHECK_THROWS_AS(s[2], nostrum::ShapeError);
  CHECK_THROWS_AS(s[-3], nostrum::ShapeError);
  CHECK_THROWS_WITH(s[5], Catch::Contains("axis 5") && Catch::Contains("(2, 3)"));
}
