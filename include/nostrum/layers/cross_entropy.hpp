// Softmax cross-entropy with label smoothing, PyTorch's definition: target = (1-eps) one-hot +
// eps/K uniform; loss = mean over samples of -sum_k target_k log softmax_k. Stable (log-sum-exp).
#pragma once

#include <cstdint>

namespace nostrum::layers {

// Returns the mean loss over n samples. d_logits (n,K) = grad_scale * (softmax - target): with
// grad_scale = 1/n it is the gradient of the mean; in data-parallel training pass
// 1/(local batch x ranks) so that an allreduce SUM of the weight gradients is the average.
// logits (n,K); labels (n) in [0, K), else DataError naming the sample. d_logits may be nullptr.
double softmax_cross_entropy(float* d_logits, const float* logits, const int32_t* labels, int n,
                             int K, float label_smoothing, float grad_scale);

// Number of samples whose largest logit (first one on ties) is the label. logits (n,K); labels (n).
int count_top1_correct(const float* logits, const int32_t* labels, int n, int K);

}  // namespace nostrum::layers
