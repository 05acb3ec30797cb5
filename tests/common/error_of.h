#pragma once
// Shared by the tests that assert exact error texts.
#include <exception>
#include <functional>
#include <string>

namespace nano::test {

/// The what() of the exception (nano::Error, nano::UsageError, ...) that `f` throws, or
/// "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace nano::test
