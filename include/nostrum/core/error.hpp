// Typed errors: every check in nostrum throws one of these with what went wrong, where (file,
// sample, rank, option) and a hint; the driver prints it and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace nostrum {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, const std::string& where = {}, const std::string& hint = {});
  const std::string& what_happened() const { return what_; }
  const std::string& where() const { return where_; }
  const std::string& hint() const { return hint_; }

 private:
  std::string what_, where_, hint_;
};

class ShapeError : public Error {
  using Error::Error;
};  // tensor shapes do not fit
class IoError : public Error {
  using Error::Error;
};  // a file cannot be read or written
class DataError : public Error {
  using Error::Error;
};  // a sample, label or shard is bad
class OptionError : public Error {
  using Error::Error;
};  // a command-line/config option is bad
class MpiError : public Error {
  using Error::Error;
};  // an MPI call failed

}  // namespace nostrum

// Throws ErrorType(message) when cond is false; message is any expression convertible to string.
#define NOSTRUM_CHECK(cond, ErrorType, ...)    \
  do {                                         \
    if (!(cond)) throw ErrorType(__VA_ARGS__); \
  } while (0)
