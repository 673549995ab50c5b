// The training loop of nostrum-train: set-up (data, model, identical weights, optimizer, schedule,
// allreducer), the timed MLPerf run (train epochs, evaluate, stop at the target), the result.
#include "trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "io/dataset.hpp"
#include "io/loader.hpp"
#include "io/weights_file.hpp"
#include "mpi/binding.hpp"
#include "mpi/bucket_plan.hpp"
#include "mpi/gradient_allreducer.hpp"
#include "mpi/mpi_reducer.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/log/mllog.hpp"
#include "nostrum/log/mllog_keys.hpp"
#include "nostrum/log/resnet_hyperparameters.hpp"
#include "nostrum/log/trace.hpp"
#include "nostrum/model/model.hpp"
#include "nostrum/optim/lars.hpp"
#include "nostrum/optim/lr_schedule.hpp"
#include "nostrum/optim/sgd.hpp"

namespace nostrum::train {

namespace keys = log::keys;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

// Base LR when --lr is 0: linear scaling from a per-256-images rate, rounded to MLPerf's 0.001 grid.
double default_lr(const std::string& optimizer, int64_t global_batch) {
  const double per_256 = optimizer == "lars" ? 0.4 : 0.1;
  return std::max(0.001, std::round(per_256 * global_batch / 256.0 * 1000.0) / 1000.0);
}

// Records the model's per-layer forward/backward spans in the Chrome trace.
class TraceObserver final : public model::LayerObserver {
 public:
  explicit TraceObserver(log::TraceWriter* trace) : trace_(trace) {}
  void on_layer(const std::string& layer, model::Phase phase, double start_s, double end_s) override {
    trace_->span(layer.c_str(), phase == model::Phase::kForward ? "forward" : "backward", 0,
                 start_s, end_s);
  }

 private:
  log::TraceWriter* trace_;
};

}  // namespace

RunResult run_training(const TrainOptions& o, const mpi::Communicator& world) {
  const bool rank0 = world.rank() == 0;
  const int ranks = world.size();
  std::ostream& out = std::cout;
  auto say = [&](const std::string& line) {
    if (rank0 && !o.quiet) out << line << std::endl;
  };

  log::MlLogger mllog(rank0, o.mllog, /*to_stdout=*/false);
  mllog.event(NOSTRUM_HERE, keys::kCacheClear, true);
  mllog.start(NOSTRUM_HERE, keys::kInitStart);

  // ---- threads and binding --------------------------------------------------------------------
  const mpi::RankBinding binding = mpi::local_binding(world.rank());
  const int rank_cores = std::max<int>(1, static_cast<int>(binding.cores.size()));
  const int threads = o.threads > 0 ? o.threads : rank_cores;
  omp_set_num_threads(threads);
  {
    std::ostringstream table;
    mpi::print_binding_report(world, table);  // collective; the table and warnings are rank 0's
    if (rank0 && !o.quiet) out << table.str();
  }
  say("nostrum-train: " + std::to_string(ranks) + " rank(s) x " + std::to_string(threads) +
      " thread(s), BLAS kernels " + kernels::blas_core_name());

  // ---- data -----------------------------------------------------------------------------------
  const io::Manifest manifest = io::Manifest::read(o.data_dir);
  const int num_classes = static_cast<int>(manifest.classes.size());
  const bool raw = manifest.kind == io::ImageKind::raw;
  const int height = raw ? manifest.height : 224;
  const int width = raw ? manifest.width : 224;
  const int channels = raw ? manifest.channels : 3;

  auto loader_config = [&](bool train) {
    io::LoaderConfig c;
    c.split = train ? "train" : "val";
    c.local_batch = o.batch_size;
    c.rank = world.rank();
    c.ranks = ranks;
    c.seed = o.seed;
    c.threads = o.loader_threads;
    c.train = train;
    c.tail = train ? data::TailPolicy::drop : data::TailPolicy::exact;
    c.augment.train = train;
    c.augment.out_height = height;
    c.augment.out_width = width;
    c.augment.out_channels = channels;
    c.augment.flip = o.random_flip;
    c.augment.pad = o.pad_crop;
    if (!manifest.mean.empty()) {  // the dataset's own statistics
      c.augment.mean.clear();
      c.augment.std.clear();
    }
    return c;
  };
  io::Loader eval_loader(o.data_dir, manifest, loader_config(false));
  std::unique_ptr<io::Loader> train_loader;
  if (!o.eval_only) train_loader = std::make_unique<io::Loader>(o.data_dir, manifest, loader_config(true));
  const int64_t eval_samples = eval_loader.split_samples();

  // ---- model ----------------------------------------------------------------------------------
  model::ModelConfig model_config;
  model_config.name = o.model;
  model_config.num_classes = num_classes;
  model_config.in_channels = channels;
  model_config.width = o.width;  // 0: the model's own (16 CIFAR-style, 64 ImageNet)
  model_config.zero_init_residual = o.zero_init_residual;
  model_config.precision = kernels::parse_precision(o.precision);
  std::unique_ptr<model::Model> net = model::Model::create(model_config);
  net->build(o.batch_size, height, width);
  net->init(o.seed);
  if (!o.init_weights.empty()) io::load_weights(o.init_weights, net->parameters());
  // Identical weights on every rank: rank 0's, checked by a checksum on all of them.
  mpi::broadcast_weights(world, net->parameter_data(), net->parameter_count());
  mpi::broadcast_weights(world, net->buffer_data(), net->buffer_count());
  RunResult result;
  result.weights_checksum =
      mpi::verify_identical(world, net->parameter_data(), net->parameter_count(), "initial weights");
  say("model " + o.model + ": " + std::to_string(net->parameter_count()) + " parameters, " +
      std::to_string(num_classes) + " classes, input " + std::to_string(height) + "x" +
      std::to_string(width) + "x" + std::to_string(channels) + ", identical on all ranks (checksum " +
      std::to_string(result.weights_checksum) + ")");

  std::unique_ptr<mpi::MpiReducer> bn_reducer;
  if (o.sync_bn && ranks > 1) {
    bn_reducer = std::make_unique<mpi::MpiReducer>(world, o.sync_bn_group);
    net->set_norm_reducer(bn_reducer.get());
  }

  std::unique_ptr<log::TraceWriter> trace;
  std::unique_ptr<TraceObserver> trace_observer;
  if (!o.trace.empty()) {
    trace = std::make_unique<log::TraceWriter>(world.rank(), size_t{1} << 22);
    trace->name_thread(0, "main");
    trace->name_thread(1, "gradient allreduce");
    trace_observer = std::make_unique<TraceObserver>(trace.get());
    net->set_observer(trace_observer.get());
  }

  // ---- evaluation (shared by --eval-only and the run) -------------------------------------------
  auto evaluate = [&]() {
    log::TraceScope scope(trace.get(), "evaluate", "eval");
    eval_loader.start_epoch(0);
    int64_t counts[2] = {0, 0};  // correct, seen
    io::Batch batch;
    while (eval_loader.next(batch)) {
      if (batch.count == 0) continue;
      net->forward(batch.images, static_cast<int>(batch.count), /*training=*/false);
      counts[0] += net->count_correct(batch.labels);
      counts[1] += batch.count;
    }
    world.allreduce_sum(counts, 2);
    NOSTRUM_CHECK(counts[1] == eval_samples, DataError,
                  "evaluation scored " + std::to_string(counts[1]) + " samples, the split has " +
                      std::to_string(eval_samples),
                  o.data_dir + " split val");
    return static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
  };

  if (o.eval_only) {
    const double accuracy = evaluate();
    say("eval-only: top-1 accuracy " + std::to_string(accuracy) + " on " +
        std::to_string(eval_samples) + " images");
    result.status = "evaluated";
    result.final_accuracy = accuracy;
    result.ranks = ranks;
    result.threads = threads;
    return result;
  }

  // ---- optimizer, schedule, MLPerf hyperparameters ---------------------------------------------
  const int64_t global_batch = int64_t{o.batch_size} * ranks;
  const int64_t steps_per_epoch = train_loader->batches_per_epoch();
  NOSTRUM_CHECK(steps_per_epoch > 0, OptionError,
                "global batch " + std::to_string(global_batch) + " is larger than the training split (" +
                    std::to_string(train_loader->split_samples()) + " samples)",
                "--batch-size", "use a smaller batch or fewer ranks");
  const double base_lr = o.lr > 0 ? o.lr : default_lr(o.optimizer, global_batch);
  optim::ScheduleOptions schedule_options;
  schedule_options.kind = optim::parse_schedule_kind(o.lr_schedule);
  schedule_options.base_lr = base_lr;
  schedule_options.end_lr = o.end_lr;
  schedule_options.power = o.poly_power;
  schedule_options.warmup_steps = std::llround(o.warmup_epochs * steps_per_epoch);
  schedule_options.total_steps = int64_t{o.epochs} * steps_per_epoch;
  const double decay_epochs = o.decay_epochs > 0 ? o.decay_epochs : o.epochs;
  schedule_options.decay_steps =
      std::max<int64_t>(1, std::llround(decay_epochs * steps_per_epoch) - schedule_options.warmup_steps);
  schedule_options.step_size = std::max<int64_t>(1, schedule_options.total_steps / 3);
  const optim::LrSchedule schedule(schedule_options);

  std::unique_ptr<optim::Optimizer> optimizer;
  if (o.optimizer == "sgd") {
    optim::SgdOptions s;
    s.momentum = static_cast<float>(o.momentum);
    s.nesterov = o.nesterov;
    s.weight_decay = static_cast<float>(o.weight_decay);
    s.exempt_bias_and_norm_from_decay = o.exempt_bias_and_norm;
    optimizer = std::make_unique<optim::Sgd>(net->parameters(), s);
  } else {
    optim::LarsOptions l;
    l.momentum = static_cast<float>(o.momentum);
    l.weight_decay = static_cast<float>(o.weight_decay);
    l.eta = static_cast<float>(o.lars_eta);
    l.epsilon = 0.0f;
    optimizer = std::make_unique<optim::Lars>(net->parameters(), l);
  }

  log::ResnetHyperparameters hyper;
  hyper.optimizer = o.optimizer;
  hyper.base_lr = base_lr;
  hyper.end_lr = o.end_lr;
  hyper.poly_power = o.poly_power;
  hyper.decay_steps = schedule_options.decay_steps;
  hyper.warmup_epochs = o.warmup_epochs;
  hyper.momentum = o.momentum;
  hyper.weight_decay = o.weight_decay;
  hyper.epsilon = 0.0;
  hyper.bn_span = o.sync_bn ? int64_t{o.batch_size} * (o.sync_bn_group ? o.sync_bn_group : ranks)
                            : o.batch_size;
  std::vector<std::string> violations = log::closed_division_violations(hyper);
  if (o.lr_schedule != "poly")
    violations.push_back("the closed division's ResNet recipe decays the LR polynomially (--lr-schedule poly)");
  if (!o.exempt_bias_and_norm)
    violations.push_back("the reference exempts BN and bias parameters from weight decay");
  for (const auto& v : violations) say("warning: MLPerf closed division: " + v + " (logged as open)");

  mllog.event(NOSTRUM_HERE, keys::kSubmissionBenchmark, keys::kResnet);
  mllog.event(NOSTRUM_HERE, keys::kSubmissionDivision, violations.empty() ? "closed" : "open");
  mllog.event(NOSTRUM_HERE, keys::kSubmissionOrg, o.submission_org);
  mllog.event(NOSTRUM_HERE, keys::kSubmissionPlatform, o.submission_platform);
  mllog.event(NOSTRUM_HERE, keys::kSubmissionStatus, o.submission_status);
  mllog.event(NOSTRUM_HERE, keys::kGlobalBatchSize, global_batch);
  mllog.event(NOSTRUM_HERE, keys::kGradientAccumulationSteps, 1);
  mllog.event(NOSTRUM_HERE, keys::kSeed, static_cast<int64_t>(o.seed));
  mllog.event(NOSTRUM_HERE, keys::kTrainSamples, steps_per_epoch * global_batch);
  mllog.event(NOSTRUM_HERE, keys::kEvalSamples, eval_samples);
  log::log_hyperparameters(mllog, NOSTRUM_HERE, hyper);

  // ---- gradient allreduce -----------------------------------------------------------------------
  std::unique_ptr<mpi::GradientAllreducer> allreducer;
  if (ranks > 1) {
    // auto: overlap where this rank has a core its OpenMP threads leave free, or where there is
    // more than one bucket to hide (one bucket is ready only when backward ends, and its thread
    // would only compete with backward for the core). The same on every rank under a uniform
    // launch; the modes give bit-identical sums in any case.
    constexpr double kFirstBucketMb = 1.0;
    const bool spare_core = rank_cores > threads;
    const size_t buckets =
        mpi::plan_buckets(net->parameter_count(), o.bucket_mb, kFirstBucketMb).size();
    const bool overlap =
        o.overlap == "on" || (o.overlap == "auto" && (spare_core || buckets > 1));
    allreducer = std::make_unique<mpi::GradientAllreducer>(
        world, net->gradient_data(), net->parameter_count(), o.bucket_mb, kFirstBucketMb,
        overlap ? mpi::OverlapMode::kOverlap : mpi::OverlapMode::kSynchronous,
        /*main_thread_calls_mpi=*/bn_reducer != nullptr);
    if (o.overlap == "auto" && !overlap)
      say("note: no overlap: one gradient bucket, and " + std::to_string(threads) +
          " thread(s) on " + std::to_string(rank_cores) +
          " core(s) per rank leave none for a communication thread (--overlap on forces it)");
    if (!allreducer->mode_note().empty()) say("note: " + allreducer->mode_note());
    say("gradients: " + std::to_string(allreducer->buckets().size()) + " bucket(s) of <= " +
        std::to_string(o.bucket_mb) + " MB, " +
        (allreducer->mode() == mpi::OverlapMode::kOverlap ? "overlapped with backward"
                                                          : "reduced after backward"));
  }
  const float grad_scale = 1.0f / static_cast<float>(global_batch);
  say("recipe: " + o.optimizer + " lr " + std::to_string(base_lr) + " (" + o.lr_schedule +
      ", warmup " + std::to_string(o.warmup_epochs) + " epochs), global batch " +
      std::to_string(global_batch) + ", " + std::to_string(steps_per_epoch) +
      " steps/epoch, target " + std::to_string(o.target_accuracy) + " in <= " +
      std::to_string(o.epochs) + " epochs");

  world.barrier();
  mllog.end(NOSTRUM_HERE, keys::kInitStop);
  // ---- the timed run ----------------------------------------------------------------------------
  world.barrier();
  mllog.start(NOSTRUM_HERE, keys::kRunStart);
  const Clock::time_point run_start = Clock::now();
  result.status = keys::kAborted;
  double train_loop_seconds = 0.0;
  int64_t images_trained = 0;
  int64_t step = 0;
  int block_first_epoch = 1;

  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    if (epoch == block_first_epoch)
      mllog.start(NOSTRUM_HERE, keys::kBlockStart, {},
                  {{keys::kFirstEpochNum, epoch},
                   {keys::kEpochCount, std::min(o.epochs - epoch + 1,
                                                epoch == 1 ? o.eval_offset + o.eval_every
                                                           : o.eval_every)}});
    mllog.start(NOSTRUM_HERE, keys::kEpochStart, {}, {{keys::kEpochNum, epoch}});
    const Clock::time_point epoch_start = Clock::now();
    train_loader->reset_stats();
    train_loader->start_epoch(epoch - 1);
    mpi::AllreduceTimings epoch_comm;
    double loss_sum = 0.0;
    int64_t loss_count = 0;
    double last_progress = 0.0;
    io::Batch batch;
    for (int64_t i = 0; i < steps_per_epoch; ++i, ++step) {
      {
        log::TraceScope wait(trace.get(), "data wait", "data");
        NOSTRUM_CHECK(train_loader->next(batch), DataError,
                      "the training loader ended early at batch " + std::to_string(i), o.data_dir);
      }
      const int n = static_cast<int>(batch.count);
      net->forward(batch.images, n, /*training=*/true);
      const double loss = net->loss(batch.labels, static_cast<float>(o.label_smoothing), grad_scale);
      NOSTRUM_CHECK(std::isfinite(loss), DataError,
                    "the training loss is not finite at epoch " + std::to_string(epoch) + " step " +
                        std::to_string(i),
                    "rank " + std::to_string(world.rank()), "lower --lr or add --warmup-epochs");
      loss_sum += loss;
      ++loss_count;
      if (allreducer) {
        const double step_begin = trace ? omp_get_wtime() : 0.0;
        allreducer->begin_step();
        net->backward([&](size_t ready_from) { allreducer->on_ready(ready_from); });
        {
          log::TraceScope wait(trace.get(), "allreduce wait", "comm");
          epoch_comm += allreducer->finish_step();
        }
        if (trace) {
          for (const mpi::BucketEvent& e : allreducer->bucket_events()) {
            trace->instant_at("bucket ready", "comm", 1, step_begin + e.ready);
            trace->span("allreduce bucket", "comm", 1, step_begin + e.start, step_begin + e.end);
          }
        }
      } else {
        net->backward();
      }
      optimizer->step(static_cast<float>(schedule.lr(step)));
      images_trained += global_batch;

      const double elapsed = seconds_since(epoch_start);
      if (rank0 && !o.quiet && elapsed - last_progress >= o.progress_seconds) {
        last_progress = elapsed;
        const double rate = (i + 1) * global_batch / elapsed;
        const double remaining = (steps_per_epoch - i - 1) * global_batch / rate;
        char line[200];
        std::snprintf(line, sizeof line,
                      "  epoch %d step %lld/%lld  loss %.4f (rank 0)  %.0f img/s  epoch ETA %s", epoch,
                      static_cast<long long>(i + 1), static_cast<long long>(steps_per_epoch),
                      loss_sum / loss_count, rate, format_duration(remaining).c_str());
        out << line << std::endl;
      }
    }
    const double epoch_seconds = seconds_since(epoch_start);
    train_loop_seconds += epoch_seconds;
    const io::LoaderStats data_stats = train_loader->stats();
    result.time.data_wait += data_stats.wait_seconds;
    result.time.exposed_allreduce += epoch_comm.exposed_seconds;
    result.time.hidden_allreduce += epoch_comm.hidden_seconds;
    result.time.compute += epoch_seconds - data_stats.wait_seconds - epoch_comm.exposed_seconds;
    double epoch_loss[2] = {loss_sum, static_cast<double>(loss_count)};
    world.allreduce_sum(epoch_loss, 2);
    mllog.end(NOSTRUM_HERE, keys::kEpochStop, {}, {{keys::kEpochNum, epoch}});
    result.epochs = epoch;

    if (rank0 && !o.quiet) {
      char line[300];
      std::snprintf(line, sizeof line,
                    "epoch %d/%d  loss %.4f  %.0f img/s  %.1f s  (data wait %.1f%%, allreduce "
                    "%.2f s of which hidden %.0f%%)",
                    epoch, o.epochs, epoch_loss[0] / epoch_loss[1],
                    steps_per_epoch * global_batch / epoch_seconds, epoch_seconds,
                    100.0 * data_stats.wait_seconds / epoch_seconds, epoch_comm.allreduce_seconds,
                    epoch_comm.allreduce_seconds > 0
                        ? 100.0 * epoch_comm.hidden_seconds / epoch_comm.allreduce_seconds
                        : 0.0);
      out << line << std::endl;
    }

    const bool eval_due = (epoch > o.eval_offset && (epoch - o.eval_offset) % o.eval_every == 0) ||
                          epoch == o.epochs;
    if (!eval_due) continue;
    const Clock::time_point eval_start = Clock::now();
    mllog.start(NOSTRUM_HERE, keys::kEvalStart, {}, {{keys::kEpochNum, epoch}});
    const double accuracy = evaluate();
    mllog.end(NOSTRUM_HERE, keys::kEvalStop, {}, {{keys::kEpochNum, epoch}});
    mllog.event(NOSTRUM_HERE, keys::kEvalAccuracy, accuracy, {{keys::kEpochNum, epoch}});
    result.time.evaluation += seconds_since(eval_start);
    result.final_accuracy = accuracy;
    result.evals.push_back({epoch, accuracy, seconds_since(run_start)});
    mllog.end(NOSTRUM_HERE, keys::kBlockStop, {}, {{keys::kFirstEpochNum, block_first_epoch}});
    block_first_epoch = epoch + 1;
    say("eval after epoch " + std::to_string(epoch) + ": top-1 accuracy " +
        std::to_string(accuracy) + " (target " + std::to_string(o.target_accuracy) + ") at " +
        format_duration(seconds_since(run_start)));
    if (accuracy >= o.target_accuracy) {
      result.status = keys::kSuccess;
      break;
    }
  }
  result.time_to_solution = seconds_since(run_start);
  mllog.end(NOSTRUM_HERE, keys::kRunStop, {}, {{keys::kStatus, result.status}});

  result.images_per_second = train_loop_seconds > 0 ? images_trained / train_loop_seconds : 0.0;
  result.global_batch = global_batch;
  result.ranks = ranks;
  result.threads = threads;
  result.weights_checksum =
      mpi::verify_identical(world, net->parameter_data(), net->parameter_count(), "final weights");
  if (!o.save_weights.empty() && rank0) io::save_weights(o.save_weights, net->parameters(), o.model);
  if (trace) trace->write(log::TraceWriter::path_for_rank(o.trace, world.rank()));
  return result;
}

std::string result_json(const RunResult& r, const TrainOptions& o) {
  std::ostringstream j;
  j << std::setprecision(6) << std::fixed;
  j << "{\"status\": \"" << r.status << "\", \"time_to_solution_s\": " << r.time_to_solution
    << ", \"epochs\": " << r.epochs << ", \"final_accuracy\": " << r.final_accuracy
    << ", \"target_accuracy\": " << o.target_accuracy << ", \"images_per_second\": "
    << r.images_per_second << ", \"model\": \"" << o.model << "\", \"ranks\": " << r.ranks
    << ", \"threads_per_rank\": " << r.threads << ", \"global_batch\": " << r.global_batch
    << ", \"optimizer\": \"" << o.optimizer << "\", \"seed\": " << o.seed
    << ", \"time_split_s\": {\"compute\": " << r.time.compute
    << ", \"exposed_allreduce\": " << r.time.exposed_allreduce
    << ", \"hidden_allreduce\": " << r.time.hidden_allreduce << ", \"data_wait\": " << r.time.data_wait
    << ", \"evaluation\": " << r.time.evaluation << "}, \"evals\": [";
  for (size_t i = 0; i < r.evals.size(); ++i)
    j << (i ? ", " : "") << "{\"epoch\": " << r.evals[i].epoch << ", \"accuracy\": "
      << r.evals[i].accuracy << ", \"at_s\": " << r.evals[i].seconds_since_run_start << "}";
  j << "], \"weights_checksum\": \"" << std::hex << r.weights_checksum << "\"}";
  return j.str();
}

}  // namespace nostrum::train
