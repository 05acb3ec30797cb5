#pragma once
// Shared by the example tests that assert exact error texts.
#include <functional>
#include <string>

#include <nano/error.h>

namespace nano::examples::test {

/// The what() of the nano::Error that `f` throws, or "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nano::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace nano::examples::test
