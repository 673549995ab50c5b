// Checkpointing, preemption and failures (see checkpointing.hpp): signal flag, step agreement,
// non-finite checks, and the mapping between a Run and an io::CheckpointState.
#include "checkpointing.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <iterator>

#include "io/checkpoint.hpp"
#include "mpi/weight_sync.hpp"

namespace nostrum::train {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal_number) {
  g_stop_signal = signal_number;
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

StepAgreement agree(const mpi::Communicator& world, bool stop, bool checkpoint_due,
                    bool nonfinite) {
  int flags[3] = {stop ? 1 : 0, checkpoint_due ? 1 : 0, nonfinite ? 1 : 0};
  if (world.size() > 1) {
    const int code = MPI_Allreduce(MPI_IN_PLACE, flags, 3, MPI_INT, MPI_MAX, world.handle());
    NOSTRUM_CHECK(code == MPI_SUCCESS, MpiError, "MPI_Allreduce of the step flags failed",
                  "rank " + std::to_string(world.rank()));
  }
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
  const uint64_t h = mpi::checksum_bytes(text.data(), text.size());
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

io::CheckpointState capture_checkpoint(Run& run, double seconds_spent, int64_t mllog_bytes,
                                       bool epoch_closed) {
  const RunState& s = run.state;
  model::Model& net = *run.model;
  io::CheckpointState c;
  // Every rank's BN buffers, rank-major, on rank 0.
  const size_t nb = net.buffer_count();
  if (run.rank0()) c.rank_buffers.resize(nb * static_cast<size_t>(run.world.size()));
  if (run.world.size() > 1) {
    const int code =
        MPI_Gather(net.buffer_data(), static_cast<int>(nb), MPI_FLOAT, c.rank_buffers.data(),
                   static_cast<int>(nb), MPI_FLOAT, 0, run.world.handle());
    NOSTRUM_CHECK(code == MPI_SUCCESS, MpiError, "MPI_Gather of the BN buffers failed",
                  "rank " + std::to_string(run.world.rank()));
  } else {
    std::copy(net.buffer_data(), net.buffer_data() + nb, c.rank_buffers.begin());
  }
  if (!run.rank0()) return c;
  c.identity = run_identity(run);
  c.options_text = run.config.logging.options_text;
  c.ranks = run.world.size();
  c.epoch = epoch_closed ? s.epoch + 1 : s.epoch;
  c.step_in_epoch = epoch_closed ? 0 : s.step_in_epoch;
  c.steps_taken = s.steps_taken;
  c.sampler_epoch = c.epoch - 1;  // the loader's epoch argument
  c.sampler_position = c.step_in_epoch * run.plan.global_batch;
  c.seed = s.seed;
  c.seconds_spent = seconds_spent;
  c.time_split = {{"compute", s.time.compute},
                  {"exposed_allreduce", s.time.exposed_allreduce},
                  {"hidden_allreduce", s.time.hidden_allreduce},
                  {"data_wait", s.time.data_wait},
                  {"evaluation", s.time.evaluation},
                  {"train_seconds", s.train_seconds}};
  for (const auto& e : s.evals) c.evals.push_back({e.epoch, e.accuracy, e.seconds_since_run_start});
  c.counters = {{"images_trained", s.images_trained}, {"mllog_bytes", mllog_bytes}};
  c.model = io::capture_tensors(net.parameters());
  c.optimizer_name = run.optimizer->name();
  c.optimizer_steps = run.optimizer->steps_taken();
  const optim::Optimizer& opt = *run.optimizer;
  c.optimizer_state.assign(opt.state().data(), opt.state().data() + opt.state().used());
  return c;
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

void restore_checkpoint(Run& run, const io::CheckpointState& c, const std::string& path) {
  model::Model& net = *run.model;
  io::restore_tensors(c.model, net.parameters(), path);
  const size_t nb = net.buffer_count();
  const int64_t saved_ranks = c.ranks;
  NOSTRUM_CHECK(c.rank_buffers.size() == nb * static_cast<size_t>(saved_ranks), DataError,
                "checkpoint holds " + std::to_string(c.rank_buffers.size()) +
                    " per-rank batch-norm values, expected " + std::to_string(nb) + " x " +
                    std::to_string(saved_ranks) + " ranks",
                path);
  if (nb > 0) {
    float* buffers = net.buffer_data();
    if (saved_ranks == run.world.size()) {  // this rank's own statistics: bit-identical resume
      const float* own = c.rank_buffers.data() + nb * static_cast<size_t>(run.world.rank());
      std::copy(own, own + nb, buffers);
    } else {  // another rank count: the average, as an evaluation would use
      for (size_t i = 0; i < nb; ++i) {
        double sum = 0;
        for (int64_t r = 0; r < saved_ranks; ++r) sum += c.rank_buffers[nb * r + i];
        buffers[i] = static_cast<float>(sum / saved_ranks);
      }
    }
  }
  optim::Optimizer& opt = *run.optimizer;
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

  RunState& s = run.state;
  s.epoch = static_cast<int>(c.epoch);
  s.step_in_epoch = c.step_in_epoch;
  s.steps_taken = c.steps_taken;
  s.seed = c.seed;
  auto split = [&](const char* key) {
    auto it = c.time_split.find(key);
    return it == c.time_split.end() ? 0.0 : it->second;
  };
  s.time.compute = split("compute");
  s.time.exposed_allreduce = split("exposed_allreduce");
  s.time.hidden_allreduce = split("hidden_allreduce");
  s.time.data_wait = split("data_wait");
  s.time.evaluation = split("evaluation");
  s.train_seconds = split("train_seconds");
  s.evals.clear();
  for (const auto& e : c.evals)
    s.evals.push_back({static_cast<int>(e.epoch), e.accuracy, e.seconds_since_run_start});
  auto counter = [&](const char* key) {
    auto it = c.counters.find(key);
    return it == c.counters.end() ? int64_t{0} : it->second;
  };
  s.images_trained = counter("images_trained");
}

}  // namespace nostrum::train
