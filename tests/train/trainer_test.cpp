// The trainer's parts on a small synthetic dataset, under 1-4 MPI ranks: train_step equals the
// engine-level loop written out by hand (loader, forward, loss, backward, gradient sum, SGD); the
// run's counters and time split add up; an evaluation scores every validation sample exactly once
// and leaves every rank with the ranks' mean batch-norm statistics; the result JSON round-trips.
#include <mpi.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "evaluate.hpp"
#include "mpi/communicator.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"
#include "nostrum/optim/sgd.hpp"
#include "resolve.hpp"
#include "result.hpp"
#include "setup.hpp"
#include "synthetic_dataset.hpp"
#include "train_step.hpp"
#include "trainer.hpp"

using namespace nostrum;
using train::Run;
using train::RunConfig;
using train::TrainOptions;

namespace {

constexpr int kBatch = 6;  // per rank; the validation split (50) is not a multiple of 6 x ranks

// A synthetic raw 12x12x3 dataset of 10 classes (240 train, 50 val), made once by rank 0 in a
// directory every rank sees; removed when rank 0 exits.
const std::string& dataset() {
  static const std::string dir = [] {
    mpi::Communicator world;
    std::string path = world.rank() == 0 ? testing::process_temp_dir() + "/data" : "";
    world.broadcast(path, 0);
    if (world.rank() == 0) testing::write_synthetic_dataset(path, io::ImageKind::raw, 240, 50, 12);
    world.barrier();
    return path;
  }();
  return dir;
}

TrainOptions small_options() {
  TrainOptions o;
  o.data_dir = dataset();
  o.model = "resnet8";
  o.width = 4;
  o.batch_size = kBatch;
  o.epochs = 2;
  o.loader_threads = 1;
  o.threads = 1;
  o.lr = 0.05;
  o.quiet = true;
  o.seed = 3;
  return o;
}

RunConfig small_run() {
  return train::resolve(small_options());
}

std::vector<uint64_t> checksums_of_every_rank(const mpi::Communicator& world, const float* data,
                                              size_t count) {
  const uint64_t mine = hash_bytes(data, count * sizeof(float));
  std::vector<uint64_t> all(world.size());
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, world.handle());
  return all;
}

// Element i: the mean over the ranks of data[i], summed in double in rank order and rounded once
// to float (every rank's buffers gathered).
std::vector<float> mean_over_ranks(const mpi::Communicator& world, const float* data,
                                   size_t count) {
  std::vector<float> all(count * static_cast<size_t>(world.size()));
  MPI_Allgather(data, static_cast<int>(count), MPI_FLOAT, all.data(), static_cast<int>(count),
                MPI_FLOAT, world.handle());
  std::vector<float> mean(count);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0.0;
    for (int r = 0; r < world.size(); ++r) sum += all[static_cast<size_t>(r) * count + i];
    mean[i] = static_cast<float>(sum / world.size());
  }
  return mean;
}

}  // namespace

TEST_CASE("train_step equals the engine-level loop written out by hand", "[train]") {
  mpi::Communicator world;
  const RunConfig o = small_run();
  std::unique_ptr<Run> run = train::setup_run(o, world);
  // The same step by hand: a second model, loader and SGD built from the same options.
  std::unique_ptr<Run> twin = train::setup_run(o, world);
  model::Model& net = *twin->model;
  optim::SgdOptions sgd_options;
  sgd_options.momentum = static_cast<float>(o.optimizer.momentum);
  sgd_options.weight_decay = static_cast<float>(o.optimizer.weight_decay);
  sgd_options.exempt_bias_and_norm_from_decay = o.optimizer.exempt_bias_and_norm;
  optim::Sgd sgd(net.parameters(), sgd_options);
  const optim::LrSchedule schedule(train::schedule_options(
      o.schedule, o.training.epochs, run->plan.steps_per_epoch, run->plan.base_lr));
  const float scale = 1.0f / static_cast<float>(kBatch * world.size());

  run->train_loader->start_epoch(0);
  twin->train_loader->start_epoch(0);
  for (int step = 0; step < 3; ++step) {
    const train::StepRecord record = train::train_step(*run);
    io::Batch batch;
    REQUIRE(twin->train_loader->next(batch));
    net.forward(batch.images, static_cast<int>(batch.count), true);
    const double loss =
        net.loss(batch.labels, static_cast<float>(o.training.label_smoothing), scale);
    net.backward();
    world.allreduce_sum(net.gradient_data(), net.parameter_count());
    sgd.step(static_cast<float>(schedule.lr(step)));
    CHECK(record.step == step);
    CHECK(record.loss == loss);
    CHECK(record.lr == schedule.lr(step));
  }
  model::Model& stepped = *run->model;
  size_t differing = 0;
  float largest = 0.0f;
  for (size_t i = 0; i < net.parameter_count(); ++i) {
    const float a = stepped.parameter_data()[i], b = net.parameter_data()[i];
    differing += a != b;
    largest = std::max(largest, std::fabs(a - b));
  }
  // One or two ranks sum gradients in one order whatever the buckets: the same bits. More ranks
  // may sum in another order per bucket size: fp32 rounding of the sum only.
  if (world.size() <= 2)
    CHECK(differing == 0);
  else
    CHECK(largest < 1e-6f);
}

TEST_CASE("the run's counters and time split add up", "[train]") {
  mpi::Communicator world;
  const RunConfig o = small_run();
  std::unique_ptr<Run> run = train::setup_run(o, world);
  const int64_t steps_per_epoch = run->plan.steps_per_epoch;
  REQUIRE(steps_per_epoch == 240 / (kBatch * world.size()));
  const double outside_begin = train::monotonic_seconds();
  const train::EpochSummary epoch = train::train_epoch(*run, {});
  const double outside = train::monotonic_seconds() - outside_begin;
  const train::RunState& s = run->state;
  CHECK(epoch.steps == steps_per_epoch);
  CHECK(s.steps_taken == steps_per_epoch);
  CHECK(s.step_in_epoch == steps_per_epoch);
  CHECK(s.images_trained == steps_per_epoch * kBatch * world.size());
  CHECK(std::isfinite(epoch.mean_loss));
  // compute is what is left of each step after its data wait and exposed allreduce: positive only
  // when those two were measured inside the step's wall time.
  CHECK(s.time.compute > 0.0);
  CHECK(s.time.data_wait >= 0.0);
  CHECK(s.time.exposed_allreduce >= 0.0);
  CHECK(s.time.hidden_allreduce >= 0.0);
  CHECK(s.time.data_wait + s.time.exposed_allreduce < s.train_seconds);
  // The steps' wall times against a clock read around the whole epoch: inside it (no lower bound:
  // what share of the epoch the steps take depends on the machine's load).
  CHECK(s.train_seconds <= outside);
  // The epoch's summary and the run's state add up the same steps.
  CHECK(std::fabs(epoch.seconds - s.train_seconds) <= 1e-9 * s.train_seconds);
  if (world.size() == 1) CHECK(s.time.exposed_allreduce == 0.0);
}

TEST_CASE("evaluation scores every sample once and on one model", "[train]") {
  mpi::Communicator world;
  const RunConfig o = small_run();
  std::unique_ptr<Run> run = train::setup_run(o, world);
  train::train_epoch(*run, {});  // each rank's BN running statistics from its own batches
  model::Model& net = *run->model;
  const auto before = checksums_of_every_rank(world, net.buffer_data(), net.buffer_count());
  if (world.size() > 1) CHECK(before[0] != before[1]);  // the ranks saw different images
  const std::vector<float> mean = mean_over_ranks(world, net.buffer_data(), net.buffer_count());

  std::vector<int64_t> scored;
  const double accuracy = train::evaluate(*run, &scored);
  CHECK(accuracy >= 0.0);
  CHECK(accuracy <= 1.0);
  const auto after = checksums_of_every_rank(world, net.buffer_data(), net.buffer_count());
  for (uint64_t c : after) CHECK(c == after[0]);
  // ... and they are the ranks' mean, not one rank's statistics broadcast.
  size_t not_the_mean = 0;
  for (size_t i = 0; i < mean.size(); ++i) not_the_mean += net.buffer_data()[i] != mean[i];
  CHECK(not_the_mean == 0);

  // Every rank's scored sample indices, gathered: each of 0..49 exactly once.
  int mine = static_cast<int>(scored.size());
  std::vector<int> counts(world.size()), offsets(world.size());
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, world.handle());
  for (int r = 1; r < world.size(); ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<int64_t> all(offsets.back() + counts.back());
  MPI_Allgatherv(scored.data(), mine, MPI_INT64_T, all.data(), counts.data(), offsets.data(),
                 MPI_INT64_T, world.handle());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(50);
  for (int64_t i = 0; i < 50; ++i) expected[i] = i;
  CHECK(all == expected);

  // A second evaluation of the same model gives the same accuracy, bit for bit.
  CHECK(train::evaluate(*run) == accuracy);
}

TEST_CASE("the result JSON parses and round-trips", "[train]") {
  train::RunResult r;
  r.state.status = train::RunStatus::kSuccess;
  r.time_to_solution = 102.25201;
  r.epochs = 4;
  r.state.steps_taken = 7500;
  r.final_accuracy = 0.9209;
  r.target_accuracy = 0.91;
  r.images_per_second = 2459.05;
  r.model = "resnet8";
  r.optimizer = "sgd";
  r.precision = "bf16";
  r.ranks = 2;
  r.threads = 1;
  r.global_batch = 32;
  r.state.seed = 18446744073709551615ull;
  r.state.time = {90.5, 1.25, 3.5, 0.125, 10.0};
  r.state.evals = {{1, 0.871, 25.5}, {4, 0.9209, 102.0}};
  r.weights_checksum = 0xdeadbeef01234567ull;
  r.buffers_checksum = 0x0123456789abcdefull;
  r.parameters = 77754;
  r.batch_size = 16;
  r.activation_bytes = 123456789;
  r.bucket_mb = 0.25;
  r.bucket_floats = {250000, 62500, 15254};
  r.rank_cores = 2;
  r.overlap = true;
  r.onednn_version = "2.6.3";
  r.onednn_isa = "avx512_core_bf16";
  r.huge_pages = 1;
  r.anon_huge_pages_mb = 2320;
  r.peak_rss_mb = 2394;
  const std::string text = train::result_json(r);
  const train::RunResult back = train::parse_result_json(text);
  CHECK(train::result_json(back) == text);
  CHECK(back.time_to_solution == r.time_to_solution);
  CHECK(back.state.status == train::RunStatus::kSuccess);
  CHECK(back.state.steps_taken == 7500);
  CHECK(back.state.seed == r.state.seed);
  CHECK(back.state.evals.size() == 2);
  CHECK(back.state.evals[1].accuracy == r.state.evals[1].accuracy);
  CHECK(back.state.time.evaluation == r.state.time.evaluation);
  CHECK(back.state.time.hidden_allreduce == r.state.time.hidden_allreduce);
  CHECK(back.weights_checksum == r.weights_checksum);
  CHECK(back.buffers_checksum == r.buffers_checksum);
  CHECK(back.bucket_floats == r.bucket_floats);
  CHECK(back.activation_bytes == r.activation_bytes);
  CHECK(back.rank_cores == 2);
  CHECK(back.overlap);
  CHECK(back.precision == "bf16");
  CHECK(back.onednn_version == "2.6.3");
  CHECK(back.onednn_isa == "avx512_core_bf16");
  CHECK(back.huge_pages == 1);
  CHECK(back.anon_huge_pages_mb == 2320);
  CHECK(back.peak_rss_mb == 2394);
  CHECK(text.find("\"huge_pages\": true") != std::string::npos);
  CHECK(text.find("\"epochs\": 4,") != std::string::npos);        // integers stay integers
  CHECK(text.find("\"evaluation\": 10.0") != std::string::npos);  // doubles stay doubles
  CHECK(text.find("\"steps\": 7500,") != std::string::npos);      // the JSON keys readers use

  r.final_accuracy = std::numeric_limits<double>::quiet_NaN();
  const std::string with_nan = train::result_json(r);
  CHECK(with_nan.find("NaN") == std::string::npos);
  CHECK(with_nan.find("\"final_accuracy\": null") != std::string::npos);
  CHECK_THROWS_AS(train::parse_result_json("{\"status\": \"success\"}"), nostrum::DataError);
  CHECK_THROWS_AS(train::parse_result_json("not json"), nostrum::DataError);
  std::string unknown_status = text;
  unknown_status.replace(unknown_status.find("success"), 7, "victory");
  CHECK_THROWS_AS(train::parse_result_json(unknown_status), nostrum::DataError);
}

TEST_CASE("the result records the gradient buckets the allreducer reduces", "[train]") {
  mpi::Communicator world;
  TrainOptions o = small_options();
  o.model = "resnet20";  // width 32: about 1.1 M parameters, so 1 MB buckets make several
  o.width = 32;
  o.bucket_mb = 1.0;
  std::unique_ptr<Run> run = train::setup_run(train::resolve(o), world);
  const train::RunResult r = train::make_result(*run, 0.0, 0, 0);
  int64_t sum = 0;
  for (int64_t floats : r.bucket_floats) sum += floats;
  CHECK(sum == static_cast<int64_t>(run->model->parameter_count()));
  CHECK(r.parameters == sum);
  CHECK(r.bucket_floats.size() > 2);
  CHECK(r.bucket_floats[0] == 250000);  // the first bucket: 1 MB of the arena's tail
  CHECK(r.bucket_floats[1] == 250000);  // then --bucket-mb
  CHECK(r.activation_bytes == static_cast<int64_t>(run->model->activation_bytes()));
  CHECK(r.activation_bytes > 0);
  CHECK(r.batch_size == kBatch);
  CHECK(r.overlap);  // auto: more than one bucket
  CHECK(r.rank_cores == run->plan.rank_cores);
  if (run->allreducer) {  // > 1 rank: exactly the allreducer's buckets, in its order
    CHECK(r.overlap == (run->allreducer->mode() == mpi::OverlapMode::kOverlap));
    REQUIRE(run->allreducer->buckets().size() == r.bucket_floats.size());
    for (size_t k = 0; k < r.bucket_floats.size(); ++k)
      CHECK(static_cast<int64_t>(run->allreducer->buckets()[k].count) == r.bucket_floats[k]);
  }
}
