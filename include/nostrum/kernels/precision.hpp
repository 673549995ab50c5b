// The arithmetic precision of the compute layers (conv, linear): fp32 everywhere, or bf16 operands
// with fp32 accumulation (kernels/bf16.hpp). Master weights, optimizer state, BN, the loss and the
// gradient allreduce are fp32 in both.
#pragma once

#include <string>

namespace nostrum::kernels {

enum class Precision { kFp32, kBf16 };

// "fp32" / "bf16"; parse_precision throws OptionError naming both for anything else.
const char* precision_name(Precision p);
Precision parse_precision(const std::string& name);

}  // namespace nostrum::kernels
