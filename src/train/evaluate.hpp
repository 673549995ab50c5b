// evaluate: one distributed evaluation of a Run's model on the validation split (collective).
// Batch-norm running statistics are first averaged over the ranks, so every rank scores, and a
// run saves, one model; each validation sample is scored exactly once across the ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "run.hpp"

namespace nostrum::train {

// Collective. Averages the model's buffers (BN running statistics) over the ranks, so every rank
// holds the same bits (training is unaffected: it normalises with batch statistics), then returns
// the top-1 accuracy over the whole validation split. Throws DataError when the ranks together did
// not score as many samples as the split has. scored (if given) receives the split indices of the
// samples this rank scored, in order.
double evaluate(Run& run, std::vector<int64_t>* scored = nullptr);

}  // namespace nostrum::train
