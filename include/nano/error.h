#pragma once
// The one exception family of nano. Only `main` functions turn these into exit codes.
#include <stdexcept>
#include <string>

namespace nano {

/// Base of every exception nano throws. `what()` is one line that names the offending value.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad user input (an option value, a CPU list, a hostfile...). Mains exit with code 2 and
/// nothing has been started when one escapes.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace nano
