// `--conv-kernel measure|cached|fixed|NAME`: how a run gets its conv kernel table
// (kernels/conv_choice.hpp) for the shapes of its model: measured now, taken from the cache
// (kernels/conv_cache.hpp) where it holds them, today's fixed rule, or one candidate forced.
#pragma once

#include <string>
#include <vector>

#include "nostrum/kernels/conv_choice.hpp"

namespace nostrum::kernels {

enum class ConvKernelMode {
  kMeasure,    // measure every shape; write the cache (replacing its entries)
  kCached,     // the cache's choice where it has one; measure (and add) the rest
  kFixedRule,  // today's fixed rule everywhere, nothing measured
  kForced,     // one candidate wherever it fits, the fixed rule elsewhere
};

// What a program that never asks gets: the fixed rule (nostrum-train's --conv-kernel defaults to
// cached through conv_kernel_request).
struct ConvKernelRequest {
  ConvKernelMode mode = ConvKernelMode::kFixedRule;
  std::string forced;  // kForced: the candidate's name
  std::string cache;   // the cache file; "" for none
  ConvMeasureOptions measure;
};

// The value of --conv-kernel and --conv-cache ("" = default_conv_cache_path(), "none" = no
// cache). Throws OptionError naming `option` and listing the valid values for anything else.
ConvKernelRequest conv_kernel_request(const std::string& value, const std::string& cache,
                                      const std::string& option);

// The --conv-kernel value that makes this request: measure, cached, fixed or the forced name.
std::string conv_kernel_value(const ConvKernelRequest& request);

// Why this request's conv kernels cannot reach AMX tiles on this CPU ("" when some candidate it may
// run there reaches them: measure and cached where one is available, a forced one that does; the
// fixed rule never does). `--precision auto` then leaves the AMX tile probe out: bf16 would run on
// vdpbf16ps, not on the tiles the probe measures.
std::string conv_request_amx_obstacle(const ConvKernelRequest& request);

// Every candidate's name and description, one line each (for --help).
std::string conv_kernel_help();

// The table in three steps, which a multi-rank run takes apart (src/train/setup.cpp): rank 0
// plans, every rank measures the planned rows at once, rank 0 pools their tables
// (pool_conv_tables) and keeps the result in the cache.
//
// plan_conv_kernels: the rows the fixed rule, the forced candidate or the cache give (notes and
// errors as select_conv_kernels'), the others to be measured (source measured, no timings, no
// choice yet).
ConvChoiceTable plan_conv_kernels(const std::vector<ConvPassShape>& shapes, Precision precision,
                                  int threads, const ConvKernelRequest& request,
                                  std::vector<std::string>* notes);
// How many of the table's rows are still to be measured (as plan_conv_kernels leaves them).
int conv_rows_to_measure(const ConvChoiceTable& table);
// Times the rows to be measured (measure_conv_pass, on the calling thread's pool), each row's
// choice its fastest; measure_seconds the wall time. idle_memory: as select_conv_kernels'.
void measure_planned_conv_rows(ConvChoiceTable& table, const ConvMeasureOptions& options,
                               float* idle_memory = nullptr, size_t idle_floats = 0);
// The measured rows written to the request's cache, where it names one (a failure to write is a
// note: the choice is used, not kept).
void keep_conv_choices(const ConvChoiceTable& table, const ConvKernelRequest& request,
                       std::vector<std::string>* notes);

// The three steps in one process: the table for these shapes at `threads` threads (the calling
// thread's pool must have them).
// Messages for the user (a refused cache file, a forced candidate that does not fit some shapes)
// are appended to *notes. Throws OptionError when a forced candidate cannot run on this CPU or in
// this precision at all. idle_memory, idle_floats: memory the measurement may borrow for its
// operands and scratch (ConvMeasureBuffers; a model's activation_memory()); none by default.
ConvChoiceTable select_conv_kernels(const std::vector<ConvPassShape>& shapes, Precision precision,
                                    int threads, const ConvKernelRequest& request,
                                    std::vector<std::string>* notes, float* idle_memory = nullptr,
                                    size_t idle_floats = 0);

}  // namespace nostrum::kernels
