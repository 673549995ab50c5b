// Residual add (optionally fused with the ReLU that follows it in ResNet blocks) on flat NHWC
// buffers.
#pragma once

#include <cstdint>

namespace nostrum::layers {

// out (count) = a + b, or max(0, a + b) with relu; out may equal a or b.
void residual_add_forward(float* out, const float* a, const float* b, int64_t count, bool relu);

// Backward of the fused add+ReLU: d_sum (count) = d_out where out > 0, else 0; it is the gradient
// of both addends (plain add: d_sum = d_out, no call needed). d_sum may alias d_out.
void add_relu_backward(float* d_sum, const float* d_out, const float* out, int64_t count);
// The same with the forward output kept in bf16 (kernels/bf16.hpp): out > 0 as its bf16 value.
void add_relu_backward(float* d_sum, const float* d_out, const uint16_t* out_bf16, int64_t count);

// acc (count) += x (count): sums the two gradient paths of a block's input.
void accumulate(float* acc, const float* x, int64_t count);

}  // namespace nostrum::layers
