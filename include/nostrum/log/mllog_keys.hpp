// The MLPerf logging keys nostrum writes for the ResNet benchmark (mlcommons/logging constants and
// the training_4.0.0 / training_3.1.0 closed-division ResNet rules), and the fixed values they
// take.
#pragma once

namespace nostrum::log::keys {

// Submission information (exactly once each, before init_stop).
inline constexpr const char* kSubmissionBenchmark = "submission_benchmark";  // "resnet"
inline constexpr const char* kSubmissionDivision = "submission_division";    // "closed" | "open"
inline constexpr const char* kSubmissionOrg = "submission_org";
inline constexpr const char* kSubmissionPlatform = "submission_platform";
inline constexpr const char* kSubmissionStatus =
    "submission_status";  // onprem|cloud|preview|research

// Timing: intervals use start()/end(), the rest event().
inline constexpr const char* kCacheClear = "cache_clear";  // value true
inline constexpr const char* kInitStart = "init_start";
inline constexpr const char* kInitStop = "init_stop";
inline constexpr const char* kRunStart = "run_start";
inline constexpr const char* kRunStop = "run_stop";        // metadata status: "success" | "aborted"
inline constexpr const char* kBlockStart = "block_start";  // metadata first_epoch_num, epoch_count
inline constexpr const char* kBlockStop = "block_stop";
inline constexpr const char* kEpochStart = "epoch_start";  // metadata epoch_num
inline constexpr const char* kEpochStop = "epoch_stop";
inline constexpr const char* kEvalStart = "eval_start";  // metadata epoch_num
inline constexpr const char* kEvalStop = "eval_stop";
inline constexpr const char* kEvalAccuracy = "eval_accuracy";  // fraction in [0, 1), epoch_num

// Run information.
inline constexpr const char* kTrainSamples = "train_samples";
inline constexpr const char* kEvalSamples = "eval_samples";
inline constexpr const char* kGlobalBatchSize = "global_batch_size";
inline constexpr const char* kGradientAccumulationSteps = "gradient_accumulation_steps";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kOptName = "opt_name";  // "sgd" | "lars"

// SGD hyperparameters (closed_resnet_sgd.yaml).
inline constexpr const char* kSgdOptBaseLearningRate = "sgd_opt_base_learning_rate";
inline constexpr const char* kSgdOptEndLearningRate = "sgd_opt_end_learning_rate";
inline constexpr const char* kSgdOptLearningRateDecayPolyPower =
    "sgd_opt_learning_rate_decay_poly_power";
inline constexpr const char* kSgdOptLearningRateDecaySteps = "sgd_opt_learning_rate_decay_steps";
inline constexpr const char* kSgdOptWeightDecay = "sgd_opt_weight_decay";
inline constexpr const char* kSgdOptMomentum = "sgd_opt_momentum";
inline constexpr const char* kOptLearningRateWarmupEpochs = "opt_learning_rate_warmup_epochs";
inline constexpr const char* kModelBnSpan = "model_bn_span";  // per-rank BN batch (or sync group)

// LARS hyperparameters (closed_resnet_lars.yaml).
inline constexpr const char* kLarsOptBaseLearningRate = "lars_opt_base_learning_rate";
inline constexpr const char* kLarsOptEndLearningRate = "lars_opt_end_learning_rate";
inline constexpr const char* kLarsOptLearningRateDecayPolyPower =
    "lars_opt_learning_rate_decay_poly_power";
inline constexpr const char* kLarsOptLearningRateDecaySteps = "lars_opt_learning_rate_decay_steps";
inline constexpr const char* kLarsEpsilon = "lars_epsilon";
inline constexpr const char* kLarsOptLearningRateWarmupEpochs =
    "lars_opt_learning_rate_warmup_epochs";
inline constexpr const char* kLarsOptMomentum = "lars_opt_momentum";
inline constexpr const char* kLarsOptWeightDecay = "lars_opt_weight_decay";

// Metadata keys.
inline constexpr const char* kEpochNum = "epoch_num";
inline constexpr const char* kFirstEpochNum = "first_epoch_num";
inline constexpr const char* kEpochCount = "epoch_count";
inline constexpr const char* kStepNum = "step_num";
inline constexpr const char* kStatus = "status";

// Values.
inline constexpr const char* kResnet = "resnet";
inline constexpr const char* kClosed = "closed";
inline constexpr const char* kOnprem = "onprem";
inline constexpr const char* kSuccess = "success";
inline constexpr const char* kAborted = "aborted";
inline constexpr double kEndLearningRate = 0.0001;  // the end LR both ResNet optimizers must use
inline constexpr double kPolyPower = 2.0;

}  // namespace nostrum::log::keys
