// Trainer: one rank's data-parallel run to a target accuracy, read top to bottom in trainer.cpp:
// setup_run (setup.hpp) builds the Run, train_epoch calls train_step (train_step.hpp) for each
// step, evaluate (evaluate.hpp) scores the validation split, and observers (observers.hpp:
// progress, MLPerf log, trace) are told what happened. The result (result.hpp) is what
// --result-json writes.
#pragma once

#include <functional>
#include <vector>

#include "mpi/communicator.hpp"
#include "observers.hpp"
#include "result.hpp"
#include "run.hpp"
#include "run_config.hpp"

namespace nostrum::train {

// One epoch of the run's steps (state.epoch; from state.step_in_epoch, so a resumed run continues
// mid-epoch) or fewer when --max-steps is reached. Collective. Returns the epoch's numbers.
// after_step (if given) runs after each step and returns false to end the epoch early (a stop
// signal: the caller checkpoints).
EpochSummary train_epoch(Run& run, const std::vector<RunObserver*>& observers,
                         const std::function<bool(const StepRecord&)>& after_step = {});

// Runs everything the configuration asks for on this rank (collective over world): set-up, the
// timed loop of epochs and evaluations (when config.evaluation.due_after says) to the target or
// the budget, or one evaluation (--eval-only). Throws nostrum errors.
RunResult run_training(const RunConfig& config, const mpi::Communicator& world);

}  // namespace nostrum::train
