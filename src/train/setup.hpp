// setup_run: builds a Run from its resolved configuration (resolve.hpp) on this rank (collective
// over world): threads and binding, the dataset's loaders, the model with identical weights on
// every rank, optimizer, LR schedule and gradient allreducer. What it decided is in run.notes, for
// the progress output.
#pragma once

#include <memory>
#include <vector>

#include "mpi/bucket_plan.hpp"
#include "mpi/communicator.hpp"
#include "run.hpp"
#include "run_config.hpp"

namespace nostrum::train {

std::unique_ptr<Run> setup_run(const RunConfig& config, const mpi::Communicator& world);

// The gradient buckets the allreducer reduces, in reduction order (--bucket-mb, the first 1 MB),
// for any rank count: result.json records them for tools/scaling-study's model.
std::vector<mpi::Bucket> gradient_bucket_plan(const ParallelConfig& parallel,
                                              size_t parameter_count);
// Whether the allreduce overlaps backward on a communication thread (--overlap; auto: when the rank
// has a core beyond its OpenMP threads, or more than one bucket), with more than one rank.
bool overlaps_allreduce(const ParallelConfig& parallel, const RunPlan& plan, size_t buckets);

// Base LR when --lr is 0: linear scaling from a per-256-images rate (0.1 SGD, 0.4 LARS), rounded
// to MLPerf's 0.001 grid.
double default_lr(optim::OptimizerKind optimizer, int64_t global_batch);

// The schedule of a run of `epochs` epochs of steps_per_epoch steps.
optim::ScheduleOptions schedule_options(const ScheduleConfig& schedule, int epochs,
                                        int64_t steps_per_epoch, double base_lr);

}  // namespace nostrum::train
