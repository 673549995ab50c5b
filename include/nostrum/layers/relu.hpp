// ReLU over any flat float buffer (NHWC activations viewed as count floats).
#pragma once

#include <cstdint>

namespace nostrum::layers {

// out (count) = max(0, in (count)); out may equal in.
void relu_forward(float* out, const float* in, int64_t count);

// d_in (count) = d_out where out > 0, else 0 (PyTorch's subgradient 0 at 0); d_in may alias d_out.
void relu_backward(float* d_in, const float* d_out, const float* out, int64_t count);

}  // namespace nostrum::layers
