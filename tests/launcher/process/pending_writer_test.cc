#include "launcher/process/pending_writer.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

using namespace nano;

namespace {
std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}
}  // namespace

TEST_CASE("a reader that does not read: bytes wait up to the bound, then whole lines are dropped, nothing blocks") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  PendingWriter w(fds[1], 256 * 1024);
  const std::string line(1000, 'x');
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) w.write(line + "\n");  // 2 MB into a 64 KiB pipe
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(w.pending());
  CHECK(w.dropped() > 0);
  CHECK(w.dropped() % 1001 == 0);  // whole lines only
  CHECK_FALSE(w.closed());
  // The reader catches up: everything that was kept arrives, in order, and whole.
  std::string got;
  for (int round = 0; round < 200 && w.pending(); ++round) {
    got += read_all(fds[0]);
    w.flush_ready();
  }
  got += read_all(fds[0]);
  CHECK_FALSE(w.pending());
  CHECK(got.size() + w.dropped() == 2000u * 1001u);
  CHECK(got.size() % 1001 == 0);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("a reader that went away: EPIPE closes the writer, nothing raises SIGPIPE, bytes are counted") {
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);  // as the launcher does during a launch
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  close(fds[0]);
  PendingWriter w(fds[1]);
  w.write("one\n");
  w.write("two\n");
  CHECK(w.closed());
  CHECK_FALSE(w.pending());
  CHECK(w.dropped() == 8);
  close(fds[1]);
  sigaction(SIGPIPE, &previous, nullptr);
}

TEST_CASE("drain gives a slow reader a bounded time, then drops the rest") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  PendingWriter w(fds[1]);
  const std::string big(200 * 1024, 'y');
  w.write(big);  // larger than the pipe: most of it waits
  CHECK(w.pending());
  auto start = std::chrono::steady_clock::now();
  w.drain(std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= std::chrono::milliseconds(250));
  CHECK(took < std::chrono::seconds(2));
  CHECK_FALSE(w.pending());
  CHECK(w.dropped() > 0);
  CHECK(w.dropped() < big.size());
  close(fds[0]);
  close(fds[1]);
}
