// Checkpointing, preemption and failures (see checkpointing.hpp): signal flag, step agreement,
// non-finite checks, and the mapping between a Run and an io::CheckpointState.
#include "checkpointing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <type_traits>

#include "io/checkpoint.hpp"
#include "nostrum/core/hash.hpp"

namespace nostrum::train {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal_number) {
  g_stop_signal = signal_number;
}

// One field of the table (run_state.hpp) into the checkpoint's named integers or reals, and back
// (DataError naming the field when the checkpoint lacks it).
template <typename T>
void put(io::CheckpointState& c, const char* name, const T& value) {
  if constexpr (std::is_floating_point_v<T>)
    c.reals[name] = value;
  else
    c.integers[name] = static_cast<int64_t>(value);
}

template <typename T>
void take(const io::CheckpointState& c, const char* name, T& value, const std::string& path) {
  if constexpr (std::is_floating_point_v<T>) {
    const auto it = c.reals.find(name);
    NOSTRUM_CHECK(it != c.reals.end(), DataError,
                  std::string("checkpoint has no /run/reals/") + name, path);
    value = it->second;
  } else {
    const auto it = c.integers.find(name);
    NOSTRUM_CHECK(it != c.integers.end(), DataError,
                  std::string("checkpoint has no /run/integers/") + name, path);
    value = static_cast<T>(it->second);
  }
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls go on; the loop reads the flag between steps
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

int stop_signal_received() {
  return g_stop_signal;
}
void raise_stop_flag(int signal_number) {
  g_stop_signal = signal_number;
}

void hold_until_stop_signal(const mpi::Communicator& world, const std::string& where,
                            mpi::StallWatchdog* watchdog) {
  constexpr double kLimitSeconds = 600.0;
  if (world.rank() == 0)
    std::cout << "debug: holding " << where << " until a stop signal (SIGTERM or SIGUSR1)"
              << std::endl;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const double held =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int flags[2] = {stop_signal_received() != 0, world.rank() == 0 && held > kLimitSeconds};
    {
      mpi::StallWatchdog::Wait wait(watchdog);
      world.allreduce_max(flags, 2);
    }
    if (flags[0]) return;
    NOSTRUM_CHECK(!flags[1], Error,
                  "no stop signal within 600 s while holding " + where +
                      " (--debug-hold-at-step / --debug-hold-at-end)",
                  "rank " + std::to_string(world.rank()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

StepAgreement agree(const mpi::Communicator& world, bool stop, bool checkpoint_due,
                    bool nonfinite) {
  int flags[3] = {stop ? 1 : 0, checkpoint_due ? 1 : 0, nonfinite ? 1 : 0};
  if (world.size() > 1) world.allreduce_max(flags, 3);
  return {flags[0] != 0, flags[1] != 0, flags[2] != 0};
}

bool all_finite(const float* data, size_t count) {
  int bad = 0;
  const auto n = static_cast<int64_t>(count);
#pragma omp parallel for reduction(| : bad) schedule(static)
  for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(data[i]);
  return bad == 0;
}

std::string first_nonfinite(const ParameterTable& table) {
  for (const auto& p : table)
    if (!all_finite(p.value, static_cast<size_t>(p.numel())))
      return "parameter '" + p.name + "' (its value)";
  for (const auto& p : table)
    if (p.grad && !all_finite(p.grad, static_cast<size_t>(p.numel())))
      return "parameter '" + p.name + "' (its gradient)";
  return {};
}

std::string manifest_identity(const std::string& data_dir) {
  const std::string path = data_dir + "/manifest.txt";
  std::ifstream file(path, std::ios::binary);
  NOSTRUM_CHECK(file.good(), IoError, "cannot read the dataset manifest", path);
  const std::string text((std::istreambuf_iterator<char>(file)), {});
  const uint64_t h = hash_bytes(text.data(), text.size());
  char hex[40];
  std::snprintf(hex, sizeof hex, "manifest checksum %016llx", static_cast<unsigned long long>(h));
  return hex;
}

io::CheckpointIdentity run_identity(const Run& run) {
  io::CheckpointIdentity id;
  const model::ModelConfig& m = run.config.model.config;
  id.model = m.name + " width " + std::to_string(m.width) + ", " +
             std::to_string(run.model->parameter_count()) + " parameters";
  id.dataset = manifest_identity(run.config.data.dir);
  id.train_samples = run.train_loader ? run.train_loader->split_samples() : 0;
  id.eval_samples = run.plan.eval_samples;
  id.global_batch = run.plan.global_batch;
  return id;
}

io::CheckpointState capture_checkpoint(Run& run, const CheckpointMark& mark, bool epoch_closed) {
  model::Model& net = *run.model;
  io::CheckpointState c;
  // Every rank's BN buffers, rank-major, on rank 0.
  const size_t nb = net.buffer_count();
  if (run.rank0()) c.rank_buffers.resize(nb * static_cast<size_t>(run.world.size()));
  if (run.world.size() > 1) {
    run.world.gather(net.buffer_data(), nb, c.rank_buffers.data(), 0);
  } else {
    std::copy(net.buffer_data(), net.buffer_data() + nb, c.rank_buffers.begin());
  }
  if (!run.rank0()) return c;
  c.identity = run_identity(run);
  c.options_text = run.config.logging.options_text;
  RunState saved = run.state;
  if (epoch_closed) {
    ++saved.epoch;
    saved.step_in_epoch = 0;
  }
  for_each_field(saved, [&](const StateField& f, const auto& value) { put(c, f.name, value); });
  for_each_mark_field(mark, [&](const StateField& f, const auto& value) { put(c, f.name, value); });
  for (const auto& e : saved.evals)
    c.evals.push_back({e.epoch, e.accuracy, e.seconds_since_run_start});
  c.model = io::capture_tensors(net.parameters());
  const optim::Optimizer& opt = *run.optimizer;
  c.optimizer_name = opt.name();
  c.optimizer_steps = opt.steps_taken();
  c.optimizer_state.assign(opt.state().data(), opt.state().data() + opt.state().used());
  return c;
}

SavedRun saved_run(const io::CheckpointState& c, const std::string& path) {
  SavedRun saved;
  for_each_field(saved.state,
                 [&](const StateField& f, auto& value) { take(c, f.name, value, path); });
  for_each_mark_field(saved.mark,
                      [&](const StateField& f, auto& value) { take(c, f.name, value, path); });
  for (const auto& e : c.evals)
    saved.state.evals.push_back({static_cast<int>(e.epoch), e.accuracy, e.seconds_since_run_start});
  return saved;
}

std::string write_run_checkpoint(Run& run, const io::CheckpointState& state) {
  std::string outcome;  // rank 0: "ok <path>" or "error <message>"
  if (run.rank0()) {
    try {
      const CheckpointConfig& cc = run.config.checkpoint;
      outcome = "ok " + io::write_checkpoint(cc.dir, state, cc.keep);
    } catch (const Error& e) {
      outcome = std::string("error ") + e.what();
    }
  }
  run.world.broadcast(outcome, 0);
  NOSTRUM_CHECK(outcome.rfind("ok ", 0) == 0, IoError, outcome.substr(6),
                "rank 0 (--checkpoint-dir " + run.config.checkpoint.dir + ")",
                "the run stops rather than go on without checkpoints");
  return outcome.substr(3);
}

ResumePoint find_resume_point(const Run& run, const std::function<void(const std::string&)>& say) {
  const io::CheckpointIdentity expected = run_identity(run);
  const CheckpointConfig& cc = run.config.checkpoint;
  std::string chosen;  // rank 0's choice, or "error <message>"
  if (run.rank0()) {
    if (!cc.resume_from.empty()) {
      try {
        io::load_checkpoint(cc.resume_from, expected);
        chosen = cc.resume_from;
      } catch (const Error& e) {
        chosen = std::string("error ") + e.what();
      }
    } else {
      const io::FoundCheckpoint found = io::find_latest_checkpoint(cc.dir, expected);
      for (const auto& why : found.refused) say("checkpoint refused: " + why);
      if (found.path.empty())
        say("--resume: no usable checkpoint in " + cc.dir +
            (found.refused.empty() ? "" : " (every one refused, see above)") + ": starting afresh");
      else if (!found.refused.empty())
        say("--resume: falling back to the newest good checkpoint " + found.path);
      chosen = found.path;
    }
  }
  run.world.broadcast(chosen, 0);
  // The same refusal on every rank: an option error (rank 0 reports it, no abort).
  NOSTRUM_CHECK(chosen.rfind("error ", 0) != 0, OptionError, chosen.substr(6), "--resume-from",
                "give a checkpoint of this model, dataset and global batch");
  ResumePoint point;
  point.path = chosen;
  if (!chosen.empty()) point.state = io::load_checkpoint(chosen, expected);  // every rank verifies
  return point;
}

namespace {

// The BN buffers: this rank's own when the rank count is the same (bit-identical resume), else
// the average over the saved ranks, as an evaluation would use.
void restore_bn_buffers(Run& run, const io::CheckpointState& c, int64_t saved_ranks,
                        const std::string& path) {
  model::Model& net = *run.model;
  const size_t nb = net.buffer_count();
  NOSTRUM_CHECK(c.rank_buffers.size() == nb * static_cast<size_t>(saved_ranks), DataError,
                "checkpoint holds " + std::to_string(c.rank_buffers.size()) +
                    " per-rank batch-norm values, expected " + std::to_string(nb) + " x " +
                    std::to_string(saved_ranks) + " ranks",
                path);
  if (nb == 0) return;
  float* buffers = net.buffer_data();
  if (saved_ranks == run.world.size()) {
    const float* own = c.rank_buffers.data() + nb * static_cast<size_t>(run.world.rank());
    std::copy(own, own + nb, buffers);
    return;
  }
  for (size_t i = 0; i < nb; ++i) {
    double sum = 0;
    for (int64_t r = 0; r < saved_ranks; ++r) sum += c.rank_buffers[nb * r + i];
    buffers[i] = static_cast<float>(sum / saved_ranks);
  }
}

void restore_optimizer(optim::Optimizer& opt, const io::CheckpointState& c,
                       const std::string& path) {
  NOSTRUM_CHECK(
      c.optimizer_name == opt.name(), DataError,
      "checkpoint was written with optimizer " + c.optimizer_name + ", this run uses " + opt.name(),
      path, "resume with --optimizer " + c.optimizer_name);
  NOSTRUM_CHECK(c.optimizer_state.size() == opt.state().used(), DataError,
                "optimizer state of " + std::to_string(c.optimizer_state.size()) +
                    " floats, this run's has " + std::to_string(opt.state().used()),
                path);
  std::copy(c.optimizer_state.begin(), c.optimizer_state.end(), opt.state().data());
  opt.set_steps_taken(c.optimizer_steps);
}

}  // namespace

CheckpointMark restore_checkpoint(Run& run, const io::CheckpointState& c, const std::string& path) {
  const SavedRun saved = saved_run(c, path);
  io::restore_tensors(c.model, run.model->parameters(), path);
  restore_bn_buffers(run, c, saved.mark.ranks, path);
  restore_optimizer(*run.optimizer, c, path);
  run.state = saved.state;
  return saved.mark;
}

}  // namespace nostrum::train
