// The listen guard's filter (launcher/source_filter/source_filter.h) on real sockets, and the preloaded guard
// (launcher/listen_guard/listen_guard.c) in a real process: connections from listed sources are made, others
// are dropped in the kernel before any connection exists.
#include "launcher/source_filter/source_filter.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace {

int listen_on(int family, const char* address, int& port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_storage a{};
  socklen_t size = 0;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    in->sin_family = AF_INET;
    inet_pton(AF_INET, address, &in->sin_addr);
    size = sizeof *in;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    in6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, address, &in6->sin6_addr);
    size = sizeof *in6;
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), size) != 0) {
    close(fd);
    return -1;
  }
  size = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&a)->sin_port
                                 : reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return fd;
}

// True when a connection from `source` to `target`:`port` is made within 300 ms (a dropped SYN
// only times out).
bool connects(int family, const char* source, const char* target, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_storage from{}, to{};
  socklen_t size = 0;
  if (family == AF_INET) {
    auto* f = reinterpret_cast<sockaddr_in*>(&from);
    auto* t = reinterpret_cast<sockaddr_in*>(&to);
    f->sin_family = t->sin_family = AF_INET;
    inet_pton(AF_INET, source, &f->sin_addr);
    inet_pton(AF_INET, target, &t->sin_addr);
    t->sin_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in);
  } else {
    auto* f = reinterpret_cast<sockaddr_in6*>(&from);
    auto* t = reinterpret_cast<sockaddr_in6*>(&to);
    f->sin6_family = t->sin6_family = AF_INET6;
    inet_pton(AF_INET6, source, &f->sin6_addr);
    inet_pton(AF_INET6, target, &t->sin6_addr);
    t->sin6_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in6);
  }
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&from), size) == 0);
  connect(fd, reinterpret_cast<sockaddr*>(&to), size);
  pollfd p{fd, POLLOUT, 0};
  bool made = false;
  if (poll(&p, 1, 300) == 1) {
    int error = 0;
    socklen_t len = sizeof error;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    made = error == 0;
  }
  close(fd);
  return made;
}

uint32_t ipv4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

}  // namespace

TEST_CASE("source filter: its program, its parser") {
  sock_filter program[NANO_MAX_SOURCES + NANO_FILTER_OVERHEAD];
  const uint32_t two[] = {ipv4("10.0.0.1"), ipv4("10.0.0.2")};
  REQUIRE(nano_source_filter(two, 2, program, 2 + NANO_FILTER_OVERHEAD) == 2 + NANO_FILTER_OVERHEAD);
  CHECK(program[4].k == 0x0a000001);  // the first compare: 10.0.0.1, host order
  CHECK(program[4].jt == 2 + 9);      // to the pass at the end
  CHECK(program[5].jt == 1 + 9);
  CHECK(program[2 + NANO_FILTER_OVERHEAD - 1].k == 0xffffffffu);
  CHECK(nano_source_filter(two, 2, program, 2 + NANO_FILTER_OVERHEAD - 1) == -1);  // no room
  CHECK(nano_source_filter(two, NANO_MAX_SOURCES + 1, program, 1000) == -1);

  uint32_t sources[4];
  CHECK(nano_parse_sources("10.0.0.1,10.0.0.2", sources, 4) == 2);
  CHECK(sources[1] == ipv4("10.0.0.2"));
  CHECK(nano_parse_sources("1.1.1.1,2.2.2.2,3.3.3.3", sources, 2) == -1);
}

TEST_CASE("NANO_LISTEN_GUARD's value: sources, off, or malformed (which refuses every guarded listener)") {
  std::string many;  // 241 sources: one more than a filter holds
  for (int i = 0; i <= NANO_MAX_SOURCES; ++i)
    many += (i ? "," : "") + std::string("10.0.") + std::to_string(i / 200) + "." + std::to_string(i % 200 + 1);
  const std::string most = many.substr(0, many.rfind(','));  // 240
  struct Row {
    const char* value;  // nullptr: unset
    int guard;
  };
  const std::vector<Row> table = {
      {nullptr, NANO_GUARD_OFF},
      {"off", NANO_GUARD_OFF},
      {"10.0.0.1", 1},
      {"127.0.0.1,10.0.0.2", 2},
      {most.c_str(), NANO_MAX_SOURCES},
      {"", NANO_GUARD_MALFORMED},
      {"10.0.0.1,", NANO_GUARD_MALFORMED},           // a trailing comma
      {",10.0.0.1", NANO_GUARD_MALFORMED},           // a leading one
      {"10.0.0.1,,10.0.0.2", NANO_GUARD_MALFORMED},  // an empty item
      {"10.0.0.1, 10.0.0.2", NANO_GUARD_MALFORMED},  // spaces
      {" 10.0.0.1", NANO_GUARD_MALFORMED},
      {"10.0.0.1 ", NANO_GUARD_MALFORMED},
      {many.c_str(), NANO_GUARD_MALFORMED},  // 241 sources
      {"1.2.3", NANO_GUARD_MALFORMED},
      {"10.0.0.300", NANO_GUARD_MALFORMED},
      {"::1", NANO_GUARD_MALFORMED},  // IPv4 only (::1 is always admitted)
      {"10.0.0.1,hostB", NANO_GUARD_MALFORMED},
      {"OFF", NANO_GUARD_MALFORMED},
      {"off,10.0.0.1", NANO_GUARD_MALFORMED},
  };
  uint32_t sources[NANO_MAX_SOURCES];
  for (const Row& row : table) {
    CAPTURE(std::string(row.value ? row.value : "(unset)").substr(0, 40));
    CHECK(nano_read_guard(row.value, sources, NANO_MAX_SOURCES) == row.guard);
  }
  REQUIRE(nano_read_guard("127.0.0.1,10.0.0.2", sources, NANO_MAX_SOURCES) == 2);
  CHECK(sources[1] == ipv4("10.0.0.2"));
}

TEST_CASE("source filter: the listed sources connect, others are dropped; ::1 always connects") {
  int port = 0;
  const int any = listen_on(AF_INET, "0.0.0.0", port);
  CHECK(nano_reachable_tcp_socket(any));
  int loop_port = 0;
  const int loopback = listen_on(AF_INET, "127.0.0.1", loop_port);
  CHECK_FALSE(nano_reachable_tcp_socket(loopback));
  const uint32_t allowed[] = {ipv4("127.0.0.2")};
  REQUIRE(nano_admit_only(any, allowed, 1) == 0);  // before listen(), as the guard does
  REQUIRE(listen(any, 16) == 0);
  CHECK(connects(AF_INET, "127.0.0.2", "127.0.0.1", port));
  CHECK_FALSE(connects(AF_INET, "127.0.0.3", "127.0.0.1", port));
  close(any);
  close(loopback);

  int port6 = 0;
  const int any6 = listen_on(AF_INET6, "::", port6);
  if (any6 < 0) return;  // no IPv6 here
  CHECK(nano_reachable_tcp_socket(any6));
  REQUIRE(nano_admit_only(any6, allowed, 1) == 0);
  REQUIRE(listen(any6, 16) == 0);
  CHECK(connects(AF_INET6, "::1", "::1", port6));
  CHECK(connects(AF_INET, "127.0.0.2", "127.0.0.1", port6));  // IPv4 on a dual-stack listener
  CHECK_FALSE(connects(AF_INET, "127.0.0.3", "127.0.0.1", port6));
  close(any6);
}

TEST_CASE("the listen guard preloaded: a program's listener admits NANO_LISTEN_GUARD's sources only") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(fds[1], 1);
    setenv("LD_PRELOAD", NANO_LISTEN_GUARD_LIBRARY, 1);
    setenv(NANO_LISTEN_GUARD_VARIABLE, "127.0.0.2,127.0.0.4", 1);
    // A program that knows nothing of nano: it listens on every interface.
    execl("/usr/bin/python3", "python3", "-c",
          "import socket, sys, time\n"
          "s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(16)\n"
          "print(s.getsockname()[1], flush=True)\n"
          "time.sleep(30)\n",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char text[32] = {};
  pollfd p{fds[0], POLLIN, 0};
  REQUIRE(poll(&p, 1, 10000) == 1);
  REQUIRE(read(fds[0], text, sizeof text - 1) > 0);
  const int port = std::stoi(text);
  CHECK(connects(AF_INET, "127.0.0.2", "127.0.0.1", port));
  CHECK(connects(AF_INET, "127.0.0.4", "127.0.0.1", port));
  CHECK_FALSE(connects(AF_INET, "127.0.0.3", "127.0.0.1", port));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(fds[0]);
}

TEST_CASE("the listen guard preloaded with a malformed NANO_LISTEN_GUARD fails closed, in one line naming it") {
  // Out: what the program saw; err: what the guard said.
  const std::string dir = [] {
    char pattern[] = "/tmp/nano_listen_guard_test_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    return std::string(pattern);
  }();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!freopen((dir + "/out").c_str(), "w", stdout) || !freopen((dir + "/err").c_str(), "w", stderr)) _exit(126);
    setenv("LD_PRELOAD", NANO_LISTEN_GUARD_LIBRARY, 1);
    setenv(NANO_LISTEN_GUARD_VARIABLE, "10.0.0.1,", 1);
    // Every listener other hosts could reach is refused (twice: one line all the same); loopback's stay.
    execl("/usr/bin/python3", "python3", "-c",
          "import errno, socket\n"
          "for address in ('0.0.0.0', '0.0.0.0', '127.0.0.1'):\n"
          "    s = socket.socket(); s.bind((address, 0))\n"
          "    try:\n"
          "        s.listen(16); print(address, 'listens')\n"
          "    except OSError as e:\n"
          "        print(address, errno.errorcode[e.errno])\n"
          "u = socket.socket(socket.AF_UNIX); u.bind('\\0nano-guard-test'); u.listen(1); print('unix listens')\n",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const auto slurp = [](const std::string& path) {
    std::string text;
    char buffer[4096];
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    for (ssize_t n; fd >= 0 && (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
    if (fd >= 0) close(fd);
    return text;
  };
  CHECK(slurp(dir + "/out") == "0.0.0.0 EACCES\n0.0.0.0 EACCES\n127.0.0.1 listens\nunix listens\n");
  CHECK(slurp(dir + "/err") ==
        "nano: bad NANO_LISTEN_GUARD='10.0.0.1,': every listener other hosts could reach is refused (expected IPv4 "
        "addresses separated by commas, or off)\n");
  unlink((dir + "/out").c_str());
  unlink((dir + "/err").c_str());
  rmdir(dir.c_str());
}
