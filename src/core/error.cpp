// Formats nostrum's typed errors as "what [where] (hint: ...)".
#include "nostrum/core/error.hpp"

namespace nostrum {

namespace {
std::string format(const std::string& what, const std::string& where, const std::string& hint) {
  std::string message = what;
  if (!where.empty()) message += " [" + where + "]";
  if (!hint.empty()) message += " (hint: " + hint + ")";
  return message;
}
}  // namespace

Error::Error(const std::string& what, const std::string& where, const std::string& hint)
    : std::runtime_error(format(what, where, hint)), what_(what), where_(where), hint_(hint) {}

}  // namespace nostrum
