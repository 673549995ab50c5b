// setup_run: every part of a Run, built in the order the run needs them.
#include "setup.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>

#include "io/weights_file.hpp"
#include "mpi/binding.hpp"
#include "mpi/bucket_plan.hpp"
#include "mpi/weight_sync.hpp"
#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/onednn_conv.hpp"
#include "nostrum/kernels/precision_choice.hpp"
#include "nostrum/optim/lars.hpp"
#include "nostrum/optim/sgd.hpp"

namespace nostrum::train {

namespace {

constexpr double kFirstBucketMb =
    1.0;  // the first bucket (the arena's tail) starts the allreduce early

// ", NOSTRUM_MAX_ISA=avx2 (cleared avx512f ...; DNNL_MAX_CPU_ISA=AVX2)" under a cap, else "".
std::string cap_note() {
  const CpuFeatures& f = cpu_features();
  return f.max_isa.empty() ? "" : ", " + f.describe_cap();
}

// OpenMP threads from --threads (0: the cores this rank is bound to) and the binding table.
void bind_threads(Run& run) {
  const mpi::RankBinding binding = mpi::local_binding(run.world.rank());
  run.plan.ranks = run.world.size();
  run.plan.rank_cores = std::max<int>(1, static_cast<int>(binding.cores.size()));
  const int threads = run.config.parallel.threads;
  run.plan.threads = threads > 0 ? threads : run.plan.rank_cores;
  omp_set_num_threads(run.plan.threads);
  std::ostringstream table;
  mpi::print_binding_report(run.world, table);  // collective; the table is rank 0's
  if (!table.str().empty()) run.notes.push_back(table.str());
  run.notes.push_back("nostrum-train: " + std::to_string(run.plan.ranks) + " rank(s) x " +
                      std::to_string(run.plan.threads) + " thread(s), BLAS kernels " +
                      kernels::blas_core_name() + ", oneDNN " + kernels::onednn_library().version +
                      " (" + kernels::onednn_library().isa + ")" + cap_note());
}

io::LoaderConfig loader_config(const Run& run, bool train) {
  const DataConfig& d = run.config.data;
  io::LoaderConfig c;
  c.split = train ? "train" : "val";
  c.local_batch = d.batch_size;
  c.rank = run.world.rank();
  c.ranks = run.plan.ranks;
  c.seed = run.config.training.seed;
  c.threads = d.loader_threads;
  c.train = train;
  c.tail = train ? data::TailPolicy::drop : data::TailPolicy::exact;
  c.augment.train = train;
  c.augment.out_height = run.plan.height;
  c.augment.out_width = run.plan.width;
  c.augment.out_channels = run.plan.channels;
  c.augment.flip = d.random_flip;
  c.augment.pad = d.pad_crop;
  if (!d.manifest.mean.empty()) {  // the dataset's own statistics
    c.augment.mean.clear();
    c.augment.std.clear();
  }
  return c;
}

// The image shape the model sees (raw images as stored, JPEG at 224) and the loaders.
void open_data(Run& run) {
  const DataConfig& d = run.config.data;
  const bool raw = d.manifest.kind == io::ImageKind::raw;
  run.plan.num_classes = run.config.model.config.num_classes;
  run.plan.height = raw ? d.manifest.height : 224;
  run.plan.width = raw ? d.manifest.width : 224;
  run.plan.channels = run.config.model.config.in_channels;
  run.eval_loader = std::make_unique<io::Loader>(d.dir, d.manifest, loader_config(run, false));
  run.plan.eval_samples = run.eval_loader->split_samples();
  run.plan.global_batch = int64_t{d.batch_size} * run.plan.ranks;
  if (run.config.evaluation.only) return;
  run.train_loader = std::make_unique<io::Loader>(d.dir, d.manifest, loader_config(run, true));
  run.plan.steps_per_epoch = run.train_loader->batches_per_epoch();
  run.plan.train_samples = run.train_loader->split_samples();
  NOSTRUM_CHECK(run.plan.steps_per_epoch > 0, OptionError,
                "global batch " + std::to_string(run.plan.global_batch) +
                    " is larger than the training split (" +
                    std::to_string(run.train_loader->split_samples()) + " samples)",
                "--batch-size", "use a smaller batch or fewer ranks");
}

// A rank slower at the measured conv kernels than this times the median of the other ranks is
// named in a note (kernels::slow_rank_note; quiet ranks read 1.00-1.11x apart on the AMD EPYC Zen
// 5, tools/bench/results/conv_slow_rank_2026-12-07_zen5.txt).
constexpr double kSlowRankRatio = 1.25;

// Each conv pass's kernel (--conv-kernel): rank 0 plans (the fixed rule, a forced candidate, its
// cache); every rank measures the passes left at once, on its own pool and under the run's load;
// rank 0 pools the ranks' times (kernels::pool_conv_tables: each candidate's median over the
// ranks) and keeps the result in its cache; every rank takes that table, so all ranks run the same
// kernels. An error on any rank (an allocation that failed included) is every rank's: no rank is
// left waiting in a collective the others never reach.
void choose_conv_kernels(Run& run) {
  model::Model& net = *run.model;
  const kernels::Precision precision = run.config.model.config.precision;
  const kernels::ConvKernelRequest& request = run.config.model.conv_kernels;
  const bool root = run.world.rank() == 0;
  std::vector<std::string> lines;
  // Text every rank receives from rank 0: a table, or "!" and the error every rank throws.
  const auto from_root = [&](const std::function<std::string()>& make, const std::string& what) {
    std::string text;
    if (root) {
      try {
        text = make();
      } catch (const std::exception& e) {
        text = std::string("!") + e.what();
      }
    }
    run.world.broadcast(text, 0);
    if (!text.empty() && text[0] == '!') throw OptionError(text.substr(1), "--conv-kernel");
    return kernels::conv_choices_from_json(text, what);
  };
  kernels::ConvChoiceTable table = from_root(
      [&] {
        return kernels::conv_choices_to_json(kernels::plan_conv_kernels(
            net.conv_pass_shapes(), precision, run.plan.threads, request, &lines));
      },
      "rank 0's conv kernel plan");
  if (kernels::conv_rows_to_measure(table) > 0) {
    std::string mine;
    try {
      kernels::measure_planned_conv_rows(table, request.measure, net.activation_memory(),
                                         net.activation_memory_floats());
      mine = kernels::conv_choices_to_json(table);
    } catch (const std::exception& e) {
      mine = "!rank " + std::to_string(run.world.rank()) + ": " + e.what();
    }
    const std::vector<std::string> all = run.world.gather_strings(mine, 0);
    table = from_root(
        [&] {
          std::vector<kernels::ConvChoiceTable> tables;
          for (size_t r = 0; r < all.size(); ++r) {
            if (!all[r].empty() && all[r][0] == '!') throw OptionError(all[r].substr(1));
            tables.push_back(kernels::conv_choices_from_json(
                all[r], "rank " + std::to_string(r) + "'s conv kernel table"));
          }
          const kernels::ConvChoiceTable pooled = kernels::pool_conv_tables(tables);
          kernels::keep_conv_choices(pooled, request, &lines);
          const std::string slow = kernels::slow_rank_note(pooled, kSlowRankRatio);
          if (!slow.empty()) lines.push_back(slow);
          return kernels::conv_choices_to_json(pooled);
        },
        "rank 0's conv kernel table");
  }
  std::string notes;
  for (const std::string& line : lines) notes += "note: " + line + "\n";
  run.world.broadcast(notes, 0);
  net.set_conv_kernels(table);
  if (!notes.empty()) run.notes.push_back(notes.substr(0, notes.size() - 1));
  // A summary line; the whole table with --verbose.
  std::vector<std::pair<std::string, int>> counts;
  int measured = 0, cached = 0;
  for (const kernels::ConvChoice& row : table.rows) {
    measured += row.source == kernels::ConvChoiceSource::kMeasured;
    cached += row.source == kernels::ConvChoiceSource::kCached;
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == row.chosen; });
    if (it == counts.end())
      counts.emplace_back(row.chosen, 1);
    else
      ++it->second;
  }
  std::ostringstream line;
  line << "conv kernels (--conv-kernel "
       << kernels::conv_kernel_value(run.config.model.conv_kernels) << "): " << table.rows.size()
       << " passes";
  if (measured) {
    char seconds[32];  // 2 significant digits, whole seconds from 10 s
    std::snprintf(seconds, sizeof seconds, table.measure_seconds < 10 ? "%.2g" : "%.0f",
                  table.measure_seconds);
    line << ", " << measured << " measured in " << seconds << " s";
    if (table.ranks > 1) line << " on " << table.ranks << " ranks at once (their medians)";
  }
  if (cached) line << ", " << cached << " from the cache " << run.config.model.conv_kernels.cache;
  line << ";";
  for (const auto& [name, count] : counts) line << " " << name << " x" << count;
  run.notes.push_back(line.str());
  if (run.config.logging.verbose)
    for (const std::string& row : kernels::describe_conv_choices(table))
      run.notes.push_back("  " + row);
}

// The model, initialised from the seed (or --init-weights), rank 0's weights on every rank.
void build_model(Run& run) {
  const ModelSetup& m = run.config.model;
  run.model = model::Model::create(m.config);
  model::Model& net = *run.model;
  net.build(run.config.data.batch_size, run.plan.height, run.plan.width);
  choose_conv_kernels(run);
  net.init(run.config.training.seed);
  if (!m.init_weights.empty()) io::load_weights(m.init_weights, net.parameters());
  mpi::broadcast_weights(run.world, net.parameter_data(), net.parameter_count());
  mpi::broadcast_weights(run.world, net.buffer_data(), net.buffer_count());
  run.plan.initial_checksum = mpi::verify_identical(run.world, net.parameter_data(),
                                                    net.parameter_count(), "initial weights");
  run.notes.push_back("model " + m.config.name + ": " + std::to_string(net.parameter_count()) +
                      " parameters, " + std::to_string(run.plan.num_classes) + " classes, input " +
                      std::to_string(run.plan.height) + "x" + std::to_string(run.plan.width) + "x" +
                      std::to_string(run.plan.channels) + ", identical on all ranks (checksum " +
                      std::to_string(run.plan.initial_checksum) + ")");
  const ParallelConfig& p = run.config.parallel;
  if (p.sync_bn && run.plan.ranks > 1) {
    run.bn_reducer = std::make_unique<mpi::MpiReducer>(run.world, p.sync_bn_group);
    net.set_norm_reducer(run.bn_reducer.get());
  }
}

void build_optimizer(Run& run) {
  const OptimizerConfig& o = run.config.optimizer;
  run.plan.base_lr = o.lr > 0 ? o.lr : default_lr(o.kind, run.plan.global_batch);
  run.plan.grad_scale = 1.0f / static_cast<float>(run.plan.global_batch);
  run.schedule = std::make_unique<optim::LrSchedule>(schedule_options(
      run.config.schedule, run.config.training.epochs, run.plan.steps_per_epoch, run.plan.base_lr));
  switch (o.kind) {
    case optim::OptimizerKind::kSgd: {
      optim::SgdOptions s;
      s.momentum = static_cast<float>(o.momentum);
      s.nesterov = o.nesterov;
      s.weight_decay = static_cast<float>(o.weight_decay);
      s.exempt_bias_and_norm_from_decay = o.exempt_bias_and_norm;  // LARS: always
      run.optimizer = std::make_unique<optim::Sgd>(run.model->parameters(), s);
      break;
    }
    case optim::OptimizerKind::kLars: {
      optim::LarsOptions l;
      l.momentum = static_cast<float>(o.momentum);
      l.weight_decay = static_cast<float>(o.weight_decay);
      l.eta = static_cast<float>(o.lars_eta);
      l.epsilon = 0.0f;
      l.nesterov = o.nesterov;
      run.optimizer = std::make_unique<optim::Lars>(run.model->parameters(), l);
      break;
    }
  }
}

// auto overlaps where this rank has a core its OpenMP threads leave free, or where there is more
// than one bucket to hide (one bucket is ready only when backward ends, and its thread would only
// compete with backward for the core). The same on every rank under a uniform launch; the modes
// give bit-identical sums in any case.
void build_allreducer(Run& run) {
  if (run.plan.ranks == 1) return;
  const ParallelConfig& o = run.config.parallel;
  model::Model& net = *run.model;
  const bool overlap =
      overlaps_allreduce(o, run.plan, gradient_bucket_plan(o, net.parameter_count()).size());
  run.allreducer = std::make_unique<mpi::GradientAllreducer>(
      run.world, net.gradient_data(), net.parameter_count(), o.bucket_mb, kFirstBucketMb,
      overlap ? mpi::OverlapMode::kOverlap : mpi::OverlapMode::kSynchronous,
      /*main_thread_calls_mpi=*/run.bn_reducer != nullptr);
  if (o.overlap == OverlapPolicy::kAuto && !overlap)
    run.notes.push_back("note: no overlap: one gradient bucket, and " +
                        std::to_string(run.plan.threads) + " thread(s) on " +
                        std::to_string(run.plan.rank_cores) +
                        " core(s) per rank leave none for a communication thread (--overlap on "
                        "forces it)");
  if (!run.allreducer->mode_note().empty())
    run.notes.push_back("note: " + run.allreducer->mode_note());
  run.notes.push_back("gradients: " + std::to_string(run.allreducer->buckets().size()) +
                      " bucket(s) of <= " + std::to_string(o.bucket_mb) + " MB, " +
                      (run.allreducer->mode() == mpi::OverlapMode::kOverlap
                           ? "overlapped with backward"
                           : "reduced after backward"));
}

}  // namespace

std::vector<mpi::Bucket> gradient_bucket_plan(const ParallelConfig& parallel,
                                              size_t parameter_count) {
  return mpi::plan_buckets(parameter_count, parallel.bucket_mb, kFirstBucketMb);
}

bool overlaps_allreduce(const ParallelConfig& parallel, const RunPlan& plan, size_t buckets) {
  const bool spare_core = plan.rank_cores > plan.threads;
  return parallel.overlap == OverlapPolicy::kOn ||
         (parallel.overlap == OverlapPolicy::kAuto && (spare_core || buckets > 1));
}

double default_lr(optim::OptimizerKind optimizer, int64_t global_batch) {
  const double per_256 = optimizer == optim::OptimizerKind::kLars ? 0.4 : 0.1;
  return std::max(0.001, std::round(per_256 * global_batch / 256.0 * 1000.0) / 1000.0);
}

optim::ScheduleOptions schedule_options(const ScheduleConfig& o, int epochs,
                                        int64_t steps_per_epoch, double base_lr) {
  optim::ScheduleOptions s;
  s.kind = o.kind;
  s.base_lr = base_lr;
  s.end_lr = o.end_lr;
  s.power = o.poly_power;
  s.warmup_steps = std::llround(o.warmup_epochs * steps_per_epoch);
  s.total_steps = int64_t{epochs} * steps_per_epoch;
  s.decay_steps =
      std::max<int64_t>(1, std::llround(o.decay_epochs * steps_per_epoch) - s.warmup_steps);
  s.step_size = std::max<int64_t>(1, s.total_steps / 3);
  return s;
}

namespace {

// --precision auto: rank 0 runs the register probes and every rank takes its choice, so the job
// computes in one precision.
RunConfig with_precision_chosen(RunConfig config, const mpi::Communicator& world) {
  if (!config.model.precision_auto) return config;
  std::string name, note;
  if (world.rank() == 0)
    name = kernels::precision_name(kernels::precision_from_option(
        "auto", "--precision", &note,
        kernels::conv_request_amx_obstacle(config.model.conv_kernels)));
  world.broadcast(name, 0);
  world.broadcast(note, 0);
  config.model.config.precision = kernels::parse_precision(name);
  config.model.precision_auto = false;
  config.notes.push_back("nostrum-train: " + note + "; rank 0's probes decide for every rank");
  return config;
}

}  // namespace

std::unique_ptr<Run> setup_run(const RunConfig& resolved, const mpi::Communicator& world) {
  auto run = std::make_unique<Run>(with_precision_chosen(resolved, world), world);
  run->state.seed = run->config.training.seed;
  run->notes = run->config.notes;
  bind_threads(*run);
  open_data(*run);
  build_model(*run);
  if (run->config.evaluation.only) return run;
  build_optimizer(*run);
  build_allreducer(*run);
  return run;
}

}  // namespace nostrum::train
