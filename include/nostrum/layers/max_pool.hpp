// MaxPool2d on NHWC activations with PyTorch's semantics: padding never wins (it is -inf), ties go
// to the first maximum in row-major window order, NaN propagates. Forward records each output's
// winning input position so backward is a scatter without a second search.
#pragma once

#include <cstdint>

#include "nostrum/kernels/window.hpp"

namespace nostrum::layers {

struct PoolGeometry {
  int N = 1, H = 1, W = 1, C = 1;
  int R = 3, S = 3, stride = 2, pad = 1;
  int P() const { return kernels::window_output_size(H, R, stride, pad); }
  int Q() const { return kernels::window_output_size(W, S, stride, pad); }
};

// out (N,P,Q,C); argmax (N,P,Q,C): flat index h*W+w of the winner inside its image; in (N,H,W,C).
void max_pool_forward(float* out, int32_t* argmax, const float* in, const PoolGeometry& g);
// The same on bf16 tensors (a bf16 run's stem hands its batch norm's output over in bf16): the
// maxima and winners of the fp32 call on the same values, bit for bit.
void max_pool_forward(uint16_t* out, int32_t* argmax, const uint16_t* in, const PoolGeometry& g);

// d_in (N,H,W,C) is OVERWRITTEN: each d_out (N,P,Q,C) value added at its winner, zero elsewhere.
void max_pool_backward(float* d_in, const float* d_out, const int32_t* argmax,
                       const PoolGeometry& g);

}  // namespace nostrum::layers
