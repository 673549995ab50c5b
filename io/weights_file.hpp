// Weights files: HDF5 with one float32 dataset per state_dict key at /model/<key>, in PyTorch's
// shape (OIHW for conv, () for num_batches_tracked), and root attributes format =
// "nostrum-weights", format_version = 1, model = <name>. tools/weights/ converts to and from
// PyTorch state_dicts.
#pragma once

#include <string>

#include "nostrum/core/parameter.hpp"

namespace nostrum::io {

constexpr int kWeightsFormatVersion = 1;

// Writes every parameter and buffer of table (overwrites path). IoError when it cannot.
void save_weights(const std::string& path, const ParameterTable& table,
                  const std::string& model_name);

// Reads every entry of table from path. IoError for a missing, unreadable or non-weights file or a
// newer format version; DataError naming the key for a key the file lacks, a key the model lacks,
// or a dataset that is not float32; ShapeError naming the key and both shapes for a wrong shape.
void load_weights(const std::string& path, ParameterTable& table);

}  // namespace nostrum::io
