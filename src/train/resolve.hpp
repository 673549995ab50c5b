// resolve: the one step from TrainOptions to the run's typed configuration (run_config.hpp), run
// once at set-up on every rank. It applies what each option means for the others and refuses, with
// an OptionError naming both options, every combination in which one would be ignored:
//   --sync-bn-group without --sync-bn; --checkpoint-every or --keep-checkpoints without
//   --checkpoint-dir; --lars-eta with --optimizer sgd; --poly-power with --lr-schedule other than
//   poly; --pad-crop on JPEG data; --resume without --checkpoint-dir; --resume with
//   --resume-from; --eval-only without --init-weights.
// --nesterov goes to either optimizer. --decay-bias-and-norm is SGD's: LARS exempts BN and bias
// parameters always (the MLPerf reference's skip list), so with LARS the configuration records
// the exemption it applies, and a note says the flag changes nothing.
#pragma once

#include "run_config.hpp"
#include "train_options.hpp"

namespace nostrum::train {

// Reads the dataset's manifest (--data); throws OptionError for a refused combination, IoError or
// DataError for a missing or malformed manifest.
RunConfig resolve(const TrainOptions& options);

// The evaluation part alone (no manifest needed): --eval-every, --eval-offset, the budget.
EvaluationConfig resolve_evaluation(const TrainOptions& options);

}  // namespace nostrum::train
