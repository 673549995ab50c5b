// RunResult <-> JSON with nlohmann::json (ordered keys, so the file reads in a fixed order).
#include "result.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "nostrum/core/error.hpp"
#include "setup.hpp"

namespace nostrum::train {

namespace {

using Json = nlohmann::ordered_json;

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
  return text;
}

// A double, or null when it is not finite (JSON has no NaN or Infinity).
Json number(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

template <typename T>
T field(const Json& j, const char* key) {
  NOSTRUM_CHECK(j.contains(key), DataError, std::string("result JSON has no field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("result JSON field '") + key + "' has the wrong type: " + e.what());
  }
}

}  // namespace

RunResult make_result(const Run& run, double time_to_solution, uint64_t weights_checksum,
                      uint64_t buffers_checksum) {
  const RunState& s = run.state;
  RunResult r;
  r.status = to_string(s.status);
  r.time_to_solution = time_to_solution;
  r.epochs = s.steps_taken > 0 ? s.epoch : 0;
  r.steps = s.steps_taken;
  r.final_accuracy = s.evals.empty() ? 0.0 : s.evals.back().accuracy;
  r.target_accuracy = run.options.target_accuracy;
  r.images_per_second = s.train_seconds > 0 ? s.images_trained / s.train_seconds : 0.0;
  r.model = run.options.model;
  r.optimizer = optim::to_string(run.options.optimizer);
  r.ranks = run.plan.ranks;
  r.threads = run.plan.threads;
  r.global_batch = run.plan.global_batch;
  r.seed = s.seed;
  r.time = s.time;
  r.evals = s.evals;
  r.parameters = static_cast<int64_t>(run.model->parameter_count());
  for (const mpi::Bucket& b : gradient_bucket_plan(run.options, run.model->parameter_count()))
    r.bucket_floats.push_back(static_cast<int64_t>(b.count));
  r.bucket_mb = run.options.bucket_mb;
  r.batch_size = run.options.batch_size;
  r.activation_bytes = static_cast<int64_t>(run.model->activation_bytes());
  r.rank_cores = run.plan.rank_cores;
  r.overlap = overlaps_allreduce(run.options, run.plan, r.bucket_floats.size());
  r.weights_checksum = weights_checksum;
  r.buffers_checksum = buffers_checksum;
  return r;
}

std::string result_json(const RunResult& r) {
  Json evals = Json::array();
  for (const EvalPoint& e : r.evals)
    evals.push_back({{"epoch", e.epoch},
                     {"accuracy", number(e.accuracy)},
                     {"at_s", number(e.seconds_since_run_start)}});
  const Json j = {
      {"status", r.status},
      {"time_to_solution_s", number(r.time_to_solution)},
      {"epochs", r.epochs},
      {"steps", r.steps},
      {"final_accuracy", number(r.final_accuracy)},
      {"target_accuracy", number(r.target_accuracy)},
      {"images_per_second", number(r.images_per_second)},
      {"model", r.model},
      {"optimizer", r.optimizer},
      {"ranks", r.ranks},
      {"threads_per_rank", r.threads},
      {"global_batch", r.global_batch},
      {"seed", r.seed},
      {"time_split_s",
       {{"compute", number(r.time.compute)},
        {"exposed_allreduce", number(r.time.exposed_allreduce)},
        {"hidden_allreduce", number(r.time.hidden_allreduce)},
        {"data_wait", number(r.time.data_wait)},
        {"evaluation", number(r.time.evaluation)}}},
      {"evals", evals},
      {"parameters", r.parameters},
      {"batch_size", r.batch_size},
      {"activation_bytes", r.activation_bytes},
      {"rank_cores", r.rank_cores},
      {"overlap", r.overlap},
      {"gradient_buckets", {{"bucket_mb", r.bucket_mb}, {"floats", r.bucket_floats}}},
      {"weights_checksum", hex(r.weights_checksum)},
      {"buffers_checksum", hex(r.buffers_checksum)},
  };
  return j.dump(2);  // indented: the file is read by people too
}

RunResult parse_result_json(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("result JSON does not parse: ") + e.what());
  }
  RunResult r;
  r.status = field<std::string>(j, "status");
  r.time_to_solution = field<double>(j, "time_to_solution_s");
  r.epochs = field<int>(j, "epochs");
  r.steps = field<int64_t>(j, "steps");
  r.final_accuracy = field<double>(j, "final_accuracy");
  r.target_accuracy = field<double>(j, "target_accuracy");
  r.images_per_second = field<double>(j, "images_per_second");
  r.model = field<std::string>(j, "model");
  r.optimizer = field<std::string>(j, "optimizer");
  r.ranks = field<int>(j, "ranks");
  r.threads = field<int>(j, "threads_per_rank");
  r.global_batch = field<int64_t>(j, "global_batch");
  r.seed = field<uint64_t>(j, "seed");
  const Json split = field<Json>(j, "time_split_s");
  r.time.compute = field<double>(split, "compute");
  r.time.exposed_allreduce = field<double>(split, "exposed_allreduce");
  r.time.hidden_allreduce = field<double>(split, "hidden_allreduce");
  r.time.data_wait = field<double>(split, "data_wait");
  r.time.evaluation = field<double>(split, "evaluation");
  for (const Json& e : field<Json>(j, "evals"))
    r.evals.push_back(
        {field<int>(e, "epoch"), field<double>(e, "accuracy"), field<double>(e, "at_s")});
  r.parameters = field<int64_t>(j, "parameters");
  r.batch_size = field<int64_t>(j, "batch_size");
  r.activation_bytes = field<int64_t>(j, "activation_bytes");
  r.rank_cores = field<int>(j, "rank_cores");
  r.overlap = field<bool>(j, "overlap");
  const Json buckets = field<Json>(j, "gradient_buckets");
  r.bucket_mb = field<double>(buckets, "bucket_mb");
  r.bucket_floats = field<std::vector<int64_t>>(buckets, "floats");
  r.weights_checksum = std::stoull(field<std::string>(j, "weights_checksum"), nullptr, 16);
  r.buffers_checksum = std::stoull(field<std::string>(j, "buffers_checksum"), nullptr, 16);
  return r;
}

}  // namespace nostrum::train
