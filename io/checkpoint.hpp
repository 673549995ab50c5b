// Checkpoints: one HDF5 file holding everything a resumed run needs (weights and BN buffers in the
// weights-file layout /model/<key>, optimizer state, the run's named scalars: position, seed,
// time spent; configuration) and a checksum over all of it; written atomically, pruned to the
// newest N, searched newest-first with damaged or foreign files refused by name. Layout:
// io/README.md "Checkpoints".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nostrum/core/parameter.hpp"

namespace nostrum::io {

// The checkpoint_version attribute. 2: the run's scalars as named integers and reals,
// checksummed with core/hash.hpp's Hash64. Version 1 files (no such attribute) are refused with a
// message that says so. The format_version attribute stays the weights-file layout's (1).
constexpr int kCheckpointFormatVersion = 2;
// The integer the file is named by (checkpoint_file_name): steps since the run began.
constexpr const char* kStepsTakenKey = "steps_taken";

// What must match for a checkpoint to be resumed by a run: another model, dataset or global batch
// would silently train something else.
struct CheckpointIdentity {
  std::string model;          // model name and width, e.g. "resnet8 width 16"
  std::string dataset;        // the dataset's identity, e.g. its manifest checksum
  int64_t train_samples = 0;  // samples in the training split
  int64_t eval_samples = 0;   // samples in the evaluation split
  int64_t global_batch = 0;   // images per step over all ranks (the rank count may change)
};

// One float32 tensor by name, in PyTorch's shape (a copy; the checkpoint owns it).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// One evaluation of the run so far (the run's eval history).
struct CheckpointEval {
  int64_t epoch = 0;
  double accuracy = 0.0;
  double seconds_since_run_start = 0.0;
};

// Everything a checkpoint holds. The trainer's run object fills it and reads it back.
struct CheckpointState {
  CheckpointIdentity identity;
  std::string options_text;  // the full option set, one "name = value" per line

  // The run's scalars by name (/run/integers/<name>, /run/reals/<name>): position, seed, time
  // spent and split, counters. The trainer's one field table (src/train/run_state.hpp) fills and
  // reads them; the writer, the reader and the checksum walk them as they are, so a new field
  // needs no change here. integers[kStepsTakenKey] names the file.
  std::map<std::string, int64_t> integers;
  std::map<std::string, double> reals;
  std::vector<CheckpointEval> evals;

  // Model and optimizer.
  std::vector<NamedTensor> model;      // every parameter and buffer (BN running stats) by key
  std::string optimizer_name;          // "sgd" | "lars"
  int64_t optimizer_steps = 0;         // the optimizer's own steps_taken
  std::vector<float> optimizer_state;  // the optimizer's state arena (momentum), table order
  // Every rank's BN running statistics (ranks x buffer floats, rank-major): between evaluations
  // they differ by rank, and a same-rank-count resume restores each rank's own (bit-identical).
  // /model holds rank 0's. May be empty.
  std::vector<float> rank_buffers;
};

// Copies every entry of table (values, not gradients) into named tensors, and back. restore checks
// that the names and shapes agree exactly (DataError/ShapeError naming the key and `where`).
std::vector<NamedTensor> capture_tensors(const ParameterTable& table);
void restore_tensors(const std::vector<NamedTensor>& tensors, ParameterTable& table,
                     const std::string& where);

// The checksum over every field of state (a 64-bit hash, independent of the HDF5 layout).
uint64_t checkpoint_checksum(const CheckpointState& state);

// File name of the checkpoint after `steps_taken` steps: checkpoint-<12 digits>.h5 (sorts by age).
std::string checkpoint_file_name(int64_t steps_taken);

// Creates dir if missing and proves it writable (a probe file written, fsynced and removed).
// IoError naming dir and the system's reason (permission denied, no space left, ...) otherwise.
void check_checkpoint_dir(const std::string& dir);

// Writes state to dir/checkpoint_file_name(state.steps_taken) atomically: a temporary file in dir,
// fsync, rename, fsync of dir; then keeps only the newest `keep` checkpoints (0 = keep all) and
// removes leftover temporary files. A kill at any moment leaves every earlier checkpoint intact.
// Returns the path. IoError naming the file and the reason (e.g. no space left) when it cannot:
// the earlier checkpoints are then untouched.
std::string write_checkpoint(const std::string& dir, const CheckpointState& state, int keep);

// Reads a checkpoint and verifies its format and checksum. IoError for a missing, truncated or
// non-HDF5 file, DataError for a wrong format/version (version 1: said so, with what to do), a
// missing field or a checksum mismatch; the message names the file.
CheckpointState read_checkpoint(const std::string& path);

// Empty when state may be resumed by a run of identity `expected`; otherwise why not, naming what
// differs (model, dataset, sample counts or global batch) and both values.
std::string checkpoint_mismatch(const CheckpointState& state, const CheckpointIdentity& expected);

// read_checkpoint + checkpoint_mismatch: DataError naming the file and the difference.
CheckpointState load_checkpoint(const std::string& path, const CheckpointIdentity& expected);

// Checkpoint files in dir, newest first.
std::vector<std::string> list_checkpoints(const std::string& dir);

struct FoundCheckpoint {
  std::string path;  // empty when none was usable
  CheckpointState state;
  std::vector<std::string> refused;  // "<file>: <why>" for each newer file that was refused
};

// The newest checkpoint in dir that reads, verifies and matches `expected`; each newer one that
// does not is listed in refused with the reason. path is empty when there is none.
FoundCheckpoint find_latest_checkpoint(const std::string& dir, const CheckpointIdentity& expected);

}  // namespace nostrum::io
