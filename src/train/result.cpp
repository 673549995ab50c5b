// RunResult <-> JSON with nlohmann::json (ordered keys, so the file reads in a fixed order).
#include "result.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "nostrum/core/cpu_features.hpp"
#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/isa_dispatch.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/kernels/conv_choice.hpp"
#include "nostrum/kernels/gemm.hpp"
#include "nostrum/kernels/onednn_conv.hpp"
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

// The value at `path` ("a.b": key b of object a); DataError naming the missing or mistyped field.
template <typename T>
T field(const Json& j, const std::string& path) {
  const Json* at = &j;
  for (size_t start = 0; start <= path.size();) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string key = path.substr(start, dot - start);
    NOSTRUM_CHECK(at->is_object() && at->contains(key), DataError,
                  "result JSON has no field '" + path + "'");
    at = &(*at)[key];
    start = dot + 1;
  }
  try {
    return at->get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError("result JSON field '" + path + "' has the wrong type: " + e.what());
  }
}

// Sets the value at `path` ("a.b" creates object a).
void set_field(Json& j, const std::string& path, Json value) {
  Json* at = &j;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    if (dot == std::string::npos) {
      (*at)[path.substr(start)] = std::move(value);
      return;
    }
    at = &(*at)[path.substr(start, dot - start)];
    start = dot + 1;
  }
}

template <typename T>
Json value_json(const T& value) {
  if constexpr (std::is_floating_point_v<T>)
    return number(value);
  else
    return Json(value);
}

}  // namespace

RunResult make_result(const Run& run, double time_to_solution, uint64_t weights_checksum,
                      uint64_t buffers_checksum) {
  const RunState& s = run.state;
  RunResult r;
  r.state = s;
  r.time_to_solution = time_to_solution;
  r.epochs = s.steps_taken > 0 ? s.epoch : 0;
  r.final_accuracy = s.evals.empty() ? 0.0 : s.evals.back().accuracy;
  r.target_accuracy = run.config.training.target_accuracy;
  r.images_per_second = s.train_seconds > 0 ? s.images_trained / s.train_seconds : 0.0;
  r.model = run.config.model.config.name;
  r.precision = kernels::precision_name(run.config.model.config.precision);
  r.optimizer = optim::to_string(run.config.optimizer.kind);
  r.ranks = run.plan.ranks;
  r.threads = run.plan.threads;
  r.global_batch = run.plan.global_batch;
  r.onednn_version = kernels::onednn_library().version;
  r.onednn_isa = kernels::onednn_library().isa;
  r.parameters = static_cast<int64_t>(run.model->parameter_count());
  for (const mpi::Bucket& b :
       gradient_bucket_plan(run.config.parallel, run.model->parameter_count()))
    r.bucket_floats.push_back(static_cast<int64_t>(b.count));
  r.bucket_mb = run.config.parallel.bucket_mb;
  r.batch_size = run.config.data.batch_size;
  r.activation_bytes = static_cast<int64_t>(run.model->activation_bytes());
  r.rank_cores = run.plan.rank_cores;
  r.overlap = overlaps_allreduce(run.config.parallel, run.plan, r.bucket_floats.size());
  r.weights_checksum = weights_checksum;
  r.buffers_checksum = buffers_checksum;
  r.conv_kernels = kernels::conv_choices_to_json(run.model->conv_kernels());
  const CpuFeatures& cpu = cpu_features();
  r.cpu = cpu.describe();
  r.max_isa = cpu.max_isa;
  r.cap_removed = cpu.cap_removed;
  r.dnnl_max_cpu_isa = cpu.dnnl_max_cpu_isa;
  r.openblas_core = kernels::blas_core_name();
  r.kernels_ran = describe_dispatches_ran();
  r.huge_pages = huge_pages_wanted() ? 1 : 0;
  r.anon_huge_pages_mb = static_cast<int64_t>(anon_huge_page_bytes() >> 20);
  r.peak_rss_mb = static_cast<int64_t>(peak_rss_bytes() >> 20);
  return r;
}

std::string result_json(const RunResult& r) {
  Json j = {
      {"status", to_string(r.state.status)},
      {"time_to_solution_s", number(r.time_to_solution)},
      {"epochs", r.epochs},
      {"final_accuracy", number(r.final_accuracy)},
      {"target_accuracy", number(r.target_accuracy)},
      {"images_per_second", number(r.images_per_second)},
      {"model", r.model},
      {"optimizer", r.optimizer},
      {"precision", r.precision},
      {"ranks", r.ranks},
      {"threads_per_rank", r.threads},
      {"global_batch", r.global_batch},
      {"onednn", {{"version", r.onednn_version}, {"isa", r.onednn_isa}}},
  };
  for_each_field(r.state, [&](const StateField& f, const auto& value) {
    if (f.result_key) set_field(j, f.result_key, value_json(value));
  });
  Json evals = Json::array();
  for (const EvalPoint& e : r.state.evals)
    evals.push_back({{"epoch", e.epoch},
                     {"accuracy", number(e.accuracy)},
                     {"at_s", number(e.seconds_since_run_start)}});
  j["evals"] = evals;
  j["parameters"] = r.parameters;
  j["batch_size"] = r.batch_size;
  j["activation_bytes"] = r.activation_bytes;
  j["rank_cores"] = r.rank_cores;
  j["overlap"] = r.overlap;
  j["gradient_buckets"] = {{"bucket_mb", r.bucket_mb}, {"floats", r.bucket_floats}};
  j["weights_checksum"] = hex(r.weights_checksum);
  j["buffers_checksum"] = hex(r.buffers_checksum);
  if (!r.conv_kernels.empty()) j["conv_kernels"] = Json::parse(r.conv_kernels);
  j["cpu"] = {{"features", r.cpu},
              {"max_isa", r.max_isa},
              {"cap_removed", r.cap_removed},
              {"dnnl_max_cpu_isa", r.dnnl_max_cpu_isa},
              {"openblas_core", r.openblas_core},
              {"kernels_ran", r.kernels_ran}};
  if (r.huge_pages >= 0)
    j["memory"] = {{"huge_pages", r.huge_pages == 1},
                   {"anon_huge_pages_mb", r.anon_huge_pages_mb},
                   {"peak_rss_mb", r.peak_rss_mb}};
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
  try {
    r.state.status = parse_enum_name<RunStatus>(field<std::string>(j, "status"), run_status_names(),
                                                "result JSON field 'status'");
  } catch (const OptionError& e) {
    throw DataError(e.what());
  }
  r.time_to_solution = field<double>(j, "time_to_solution_s");
  r.epochs = field<int>(j, "epochs");
  r.final_accuracy = field<double>(j, "final_accuracy");
  r.target_accuracy = field<double>(j, "target_accuracy");
  r.images_per_second = field<double>(j, "images_per_second");
  r.model = field<std::string>(j, "model");
  r.optimizer = field<std::string>(j, "optimizer");
  // Result files written before the key existed have none: read as "" (unrecorded).
  r.precision = j.contains("precision") ? field<std::string>(j, "precision") : std::string();
  r.ranks = field<int>(j, "ranks");
  r.threads = field<int>(j, "threads_per_rank");
  r.global_batch = field<int64_t>(j, "global_batch");
  if (j.contains("onednn")) {
    r.onednn_version = field<std::string>(j, "onednn.version");
    r.onednn_isa = field<std::string>(j, "onednn.isa");
  }
  for_each_field(r.state, [&](const StateField& f, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if (f.result_key) value = field<T>(j, f.result_key);
  });
  for (const Json& e : field<Json>(j, "evals"))
    r.state.evals.push_back(
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
  if (j.contains("conv_kernels")) r.conv_kernels = j.at("conv_kernels").dump();
  if (j.contains("cpu")) {  // files written before the key existed have none
    const Json cpu = field<Json>(j, "cpu");
    r.cpu = field<std::string>(cpu, "features");
    r.max_isa = field<std::string>(cpu, "max_isa");
    r.cap_removed = field<std::string>(cpu, "cap_removed");
    r.dnnl_max_cpu_isa = field<std::string>(cpu, "dnnl_max_cpu_isa");
    r.openblas_core = field<std::string>(cpu, "openblas_core");
    r.kernels_ran = field<std::string>(cpu, "kernels_ran");
  }
  if (j.contains("memory")) {  // likewise
    const Json memory = field<Json>(j, "memory");
    r.huge_pages = field<bool>(memory, "huge_pages") ? 1 : 0;
    r.anon_huge_pages_mb = field<int64_t>(memory, "anon_huge_pages_mb");
    r.peak_rss_mb = field<int64_t>(memory, "peak_rss_mb");
  }
  return r;
}

}  // namespace nostrum::train
