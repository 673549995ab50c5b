// parse_enum_name: the one way an option's text becomes an enum value. An enum's names are kept in
// one table in enum order (optimizer_names(), schedule_names(), ...); a name not in it is an
// OptionError naming the option and every valid choice.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "nostrum/core/error.hpp"

namespace nostrum {

// "a, b, c": the choices as an error message lists them.
inline std::string join_names(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// The enum value whose name is `value` (names: every name, in enum order). OptionError naming
// `option` and the valid choices otherwise.
template <typename Enum>
Enum parse_enum_name(const std::string& value, const std::vector<std::string>& names,
                     const std::string& option) {
  const auto found = std::find(names.begin(), names.end(), value);
  if (found == names.end())
    throw OptionError("invalid value '" + value + "'", option,
                      "valid choices: " + join_names(names));
  return static_cast<Enum>(found - names.begin());
}

}  // namespace nostrum
