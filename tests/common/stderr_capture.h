#pragma once
// What a piece of code writes to this process's stderr, for tests that assert exact lines.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

namespace nano::test {

/// What `f` writes to stderr, and the message of what it throws after a '|'.
inline std::string stderr_of(const std::function<void()>& f) {
  std::fflush(stderr);
  char path[] = "/tmp/nano_stderr_XXXXXX";
  const int to = mkstemp(path);
  const int saved = dup(2);
  dup2(to, 2);
  close(to);
  std::string thrown;
  try {
    f();
  } catch (const std::exception& e) {
    thrown = std::string("|") + e.what();
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  return text + thrown;
}

}  // namespace nano::test
