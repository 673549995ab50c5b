// Residual add (optionally fused with the ReLU that follows it in ResNet blocks) on flat NHWC
// buffers: the unfused layers. The model runs them inside its batch norms (the add and ReLU in the
// forward's pass, the ReLU's mask as the backward reads its gradient); the tests check the fused
// batch norm against these.
#pragma once

#include <cstdint>

namespace nostrum::layers {

// out (count) = a + b, or max(0, a + b) with relu; out may equal a or b.
void residual_add_forward(float* out, const float* a, const float* b, int64_t count, bool relu);

// Backward of the fused add+ReLU: d_sum (count) = d_out where out > 0, else 0; it is the gradient
// of both addends (plain add: d_sum = d_out, no call needed). d_sum may alias d_out.
void add_relu_backward(float* d_sum, const float* d_out, const float* out, int64_t count);

// acc (count) += x (count): sums the two gradient paths of a block's input.
void accumulate(float* acc, const float* x, int64_t count);

}  // namespace nostrum::layers
