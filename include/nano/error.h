#pragma once
// The one exception family of nano. Only `main` functions turn these into exit codes.
//
// Which one to throw, by one rule: UsageError when the caller can fix it by changing what they
// gave (an option, an environment variable, a file or folder they named, the shape of their
// data or model); Error when the world failed under a correct request (a rank died, a
// rendezvous timed out, a disk filled up, a system call failed). A UsageError is raised before
// anything starts; an Error may come at any time.
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
