// Global average pool on NHWC activations: (N,H,W,C) -> (N,C). Its output is already the
// "flattened" (N,C) matrix the classifier reads: flatten is a view, no layer and no copy.
#pragma once

namespace nostrum::layers {

// out (N,C) = mean over H*W of in (N,H,W,C).
void global_avg_pool_forward(float* out, const float* in, int N, int HW, int C);

// d_in (N,H,W,C) = d_out (N,C) / (H*W), broadcast; overwritten.
void global_avg_pool_backward(float* d_in, const float* d_out, int N, int HW, int C);

}  // namespace nostrum::layers
