// RunResult: the summary of a run that ended (also by a stop signal, status checkpointed), what
// --result-json writes (rank 0) and what tools/scaling-study and tools/mlperf read back. JSON
// through nlohmann::json: integers stay integers, no NaN or Infinity (a non-finite number is
// written as null).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run.hpp"

namespace nostrum::train {

struct RunResult {
  // The run's state at its end: status ("success" | "aborted" | "evaluated" | "checkpointed"),
  // evaluations, and the scalars the field table (run_state.hpp) gives a result key: steps,
  // seed, the time split.
  RunState state;
  double time_to_solution = 0.0;  // run_stop - run_start, seconds (0 with --eval-only)
  int epochs = 0;                 // epochs trained (a partial one counts)
  double final_accuracy = 0.0;    // the last evaluation's
  double target_accuracy = 0.0;
  double images_per_second = 0.0;  // training images (all ranks) per second of training loop
  std::string model, optimizer;
  std::string precision;  // "fp32" | "bf16", as run (--precision auto: as chosen); "" if unrecorded
  int ranks = 1, threads = 1;
  int64_t global_batch = 0;
  // oneDNN's version and the ISA it dispatched to ("avx512_core_bf16", ...); "" if unrecorded.
  std::string onednn_version, onednn_isa;
  // What tools/scaling-study's model needs of the step: the gradient buckets in reduction order
  // (floats each; the same plan for any rank count), the bucket size asked for, the model's
  // activation + gradient + scratch arena bytes at this rank's batch, the rank's cores and whether
  // its allreduce overlaps backward.
  std::vector<int64_t> bucket_floats;
  double bucket_mb = 0.0;
  int64_t parameters = 0;
  int64_t batch_size = 0;  // per rank
  int64_t activation_bytes = 0;
  int rank_cores = 1;    // cores each rank may run on
  bool overlap = false;  // the allreduce overlaps backward (or would, with more than one rank)
  uint64_t weights_checksum = 0;  // of the final parameters, identical on every rank
  uint64_t buffers_checksum = 0;  // of the final BN running statistics, identical on every rank
  // Each conv pass's kernel: kernels::conv_choices_to_json of the table the model ran (shape,
  // pass, every candidate's time, the chosen one, how it was chosen); "" if unrecorded.
  std::string conv_kernels;
  // The CPU as rank 0's kernels saw it: CpuFeatures::describe() (after NOSTRUM_MAX_ISA), the cap
  // ("" for none) and the features it cleared, DNNL_MAX_CPU_ISA, OpenBLAS's core and the variant
  // each kernel dispatch ran (describe_dispatches_ran). All "" when unrecorded (older files).
  std::string cpu, max_isa, cap_removed, dnnl_max_cpu_isa, openblas_core, kernels_ran;
  // Rank 0's memory: whether its large buffers were advised for huge pages (NOSTRUM_HUGE_PAGES),
  // how much of its memory the kernel backed with them at the end (AnonHugePages), its peak RSS.
  // -1 when unrecorded (older files).
  int huge_pages = -1;  // 1 advised, 0 not
  int64_t anon_huge_pages_mb = -1;
  int64_t peak_rss_mb = -1;
};

// The summary of a run that has ended (state.status is not kRunning); checksums given.
RunResult make_result(const Run& run, double time_to_solution, uint64_t weights_checksum,
                      uint64_t buffers_checksum);

// One JSON object, indented by 2 (the --result-json file's content, without a trailing newline).
std::string result_json(const RunResult& result);
// Reads result_json's output back; throws DataError naming the missing or mistyped field.
RunResult parse_result_json(const std::string& text);

}  // namespace nostrum::train
