// nano's job store: its wire and state as tables, then the server and its clients on real
// loopback sockets: members admitted, strangers refused, silent or crowding strangers closed,
// and a flood that leaves the members' requests answered.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <nano/error.h>
#include "core/job_secret.h"
#include "runtime/rendezvous/job_store.h"
#include "runtime/rendezvous/job_store_server.h"
#include "runtime/rendezvous/store_wire.h"

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

using namespace nano;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = make_job_secret();

// A listener on `address` (INADDR_ANY, loopback ...) at a port the kernel picks.
int listen_at(in_addr_t address, int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = address;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t size = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  port = ntohs(a.sin_port);
  return fd;
}

// A free port for a server: a listener's, closed again.
int free_port() {
  int port = 0;
  close(listen_at(htonl(INADDR_LOOPBACK), port));
  return port;
}

// A raw connection to the server: what a stranger sees and sends.
int raw_connection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  return fd;
}

// True once `fd`'s peer closed it (within `within`).
bool closed_by_peer(int fd, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) == 1) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
  }
  return false;
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

template <typename Predicate>
bool eventually(Predicate done, std::chrono::milliseconds within = 3000ms) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

}  // namespace

TEST_CASE("store wire: messages through any chunking; oversized and malformed frames refused") {
  const StoreMessage m{"set", "key/0", std::string("\0\x01value", 7), ""};
  const std::string frame = encode_store_message(m) + encode_store_message({"count"});
  StoreMessageReader reader(1024);
  std::vector<StoreMessage> got;
  for (char c : frame) {
    reader.feed(&c, 1);
    while (auto next = reader.next()) got.push_back(*next);
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0] == m);
  CHECK(got[1] == StoreMessage{"count"});
  CHECK(reader.pending() == 0);

  StoreMessageReader small(16);
  const std::string big = encode_store_message({std::string(40, 'x')});
  small.feed(big.data(), 4);  // the length alone is refused
  CHECK_THROWS_WITH_AS(small.next(), "a frame of 44 bytes (at most 16 are taken)", Error);

  StoreMessageReader broken(64);
  const std::string bad("\x06\x00\x00\x00\x09\x00\x00\x00xy", 10);  // a field longer than its frame
  broken.feed(bad.data(), bad.size());
  CHECK_THROWS_WITH_AS(broken.next(), "a field longer than its frame", Error);
}

TEST_CASE("store state: c10d's semantics, request by request") {
  StoreState s;
  using M = StoreMessage;
  CHECK(*s.answer(1, {"get", "a"}) == M{"missing"});
  CHECK(*s.answer(1, {"set", "a", "1"}) == M{"ok"});
  CHECK(*s.answer(1, {"get", "a"}) == M{"ok", "1"});
  CHECK(*s.answer(1, {"add", "n", "5"}) == M{"ok", "5"});  // a missing counter starts at 0
  CHECK(*s.answer(1, {"add", "n", "-7"}) == M{"ok", "-2"});
  CHECK(*s.answer(1, {"add", "a", "x"}) == M{"error", "add: 'x' is not a number"});
  CHECK(*s.answer(1, {"append", "a", "23"}) == M{"ok"});
  CHECK(*s.answer(1, {"get", "a"}) == M{"ok", "123"});
  // compareSet: a missing key is set when the expected value is empty; else the expected
  // value comes back and nothing changes (TCPStore's answers).
  CHECK(*s.answer(1, {"cas", "c", "x", "y"}) == M{"ok", "x"});
  CHECK(*s.answer(1, {"check", "c"}) == M{"ok", "0"});
  CHECK(*s.answer(1, {"cas", "c", "", "y"}) == M{"ok", "y"});
  CHECK(*s.answer(1, {"cas", "c", "z", "w"}) == M{"ok", "y"});
  CHECK(*s.answer(1, {"cas", "c", "y", "w"}) == M{"ok", "w"});
  CHECK(*s.answer(1, {"count"}) == M{"ok", "3"});
  CHECK(*s.answer(1, {"check", "a", "c"}) == M{"ok", "1"});
  CHECK(*s.answer(1, {"check", "a", "nope"}) == M{"ok", "0"});
  CHECK(*s.answer(1, {"delete", "c"}) == M{"ok", "1"});
  CHECK(*s.answer(1, {"delete", "c"}) == M{"ok", "0"});
  CHECK(*s.answer(1, {"wait", "a"}) == M{"ok"});
  // Waits are answered once all their keys are there; a client's waits go with it.
  CHECK_FALSE(s.answer(2, {"wait", "p", "q"}));
  CHECK_FALSE(s.answer(3, {"wait", "p"}));
  CHECK_FALSE(s.answer(4, {"wait", "q"}));
  s.forget(4);
  s.answer(1, {"set", "p", ""});
  CHECK(s.take_ready() == std::vector<std::pair<int, M>>{{3, M{"ok"}}});
  s.answer(1, {"set", "q", ""});
  CHECK(s.take_ready() == std::vector<std::pair<int, M>>{{2, M{"ok"}}});
  CHECK(s.take_ready().empty());
  CHECK(*s.answer(1, {"shout"}) == M{"error", "unknown request 'shout' with 0 arguments"});
  CHECK(*s.answer(1, {}) == M{"error", "an empty request"});
}

TEST_CASE("store state: add never overflows; a number it cannot take is named") {
  // add summed int64s unchecked (undefined behaviour), and strtoll clamped numbers beyond int64
  // to its limits without a word.
  struct Row {
    const char* name;
    StoreMessage before;  // a request that sets the scene, or {}
    StoreMessage add;
    StoreMessage answer;
  };
  using M = StoreMessage;
  const Row rows[] = {
      {"up to the largest int64",
       {"set", "n", "9223372036854775806"},
       {"add", "n", "1"},
       {"ok", "9223372036854775807"}},
      {"one past the largest int64",
       {"set", "n", "9223372036854775807"},
       {"add", "n", "1"},
       {"error", "add: key 'n' holds 9223372036854775807: adding 1 overflows int64"}},
      {"one below the smallest int64",
       {"set", "n", "-9223372036854775808"},
       {"add", "n", "-1"},
       {"error", "add: key 'n' holds -9223372036854775808: adding -1 overflows int64"}},
      {"the smallest int64 from a missing key",
       {},
       {"add", "n", "-9223372036854775808"},
       {"ok", "-9223372036854775808"}},
      {"a delta beyond int64",
       {},
       {"add", "n", "9223372036854775808"},
       {"error", "add: '9223372036854775808' is beyond int64"}},
      {"a key beyond int64",
       {"set", "n", "99999999999999999999"},
       {"add", "n", "1"},
       {"error", "add: key 'n' holds a number beyond int64"}},
      {"a NUL inside the delta",
       {},
       {"add", "n",
        std::string("5\0"
                    "7",
                    3)},
       {"error", std::string("add: '5\0"
                             "7' is not a number",
                             26)}},
      {"an empty delta", {}, {"add", "n", ""}, {"error", "add: '' is not a number"}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    StoreState s;
    if (!row.before.empty()) CHECK(*s.answer(1, row.before) == M{"ok"});
    CHECK(*s.answer(1, row.add) == row.answer);
    if (row.answer[0] == "error" && !row.before.empty())  // a refused add changes nothing
      CHECK(*s.answer(1, {"get", "n"}) == M{"ok", row.before[2]});
  }
}

TEST_CASE("job store: members share keys; get and wait block until a key comes, within the timeout") {
  const int port = free_port();
  auto server = std::make_shared<JobStoreServer>(port, kSecret);
  JobStore a("127.0.0.1", port, kSecret, 5s, server);
  JobStore b("127.0.0.1", port, kSecret, 5s);
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);
    a.set("k", bytes("v"));
  });
  CHECK(b.get("k") == bytes("v"));  // waited for a's set
  late.join();
  CHECK(a.add("n", 2) == 2);
  CHECK(b.add("n", 3) == 5);
  CHECK(b.check({"k", "n"}));
  CHECK(b.getNumKeys() == 2);
  CHECK(a.compareSet("k", bytes("v"), bytes("w")) == bytes("w"));
  CHECK(b.deleteKey("k"));
  CHECK_FALSE(b.check({"k"}));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(
      b.wait({"never"}, 300ms),
      ("nano: store at 127.0.0.1:" + std::to_string(port) + ": wait 'never' timed out after 0.3 s").c_str(), Error);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(b.getNumKeys() == 1);  // the link that ran out was made anew
  CHECK(server->counts().members == 3);
}

TEST_CASE("job store: who is refused, and how it reads") {
  const int port = free_port();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  SUBCASE("nobody listens: the rendezvous timeout names the store host") {
    CHECK_THROWS_WITH_AS(JobStore("127.0.0.1", port, kSecret, 300ms),
                         ("nano: rendezvous at " + where +
                          " timed out after 0.3 s: the store host (rank 0) did not answer (Connection refused)")
                             .c_str(),
                         Error);
  }
  SUBCASE("another job's secret") {
    auto server = std::make_shared<JobStoreServer>(port, kSecret);
    CHECK_THROWS_WITH_AS(JobStore("127.0.0.1", port, make_job_secret(), 2s),
                         ("nano: the store at " + where +
                          " refused this rank (closed by the server): it belongs to another job, or NANO_JOB_SECRET "
                          "differs")
                             .c_str(),
                         Error);
    CHECK(server->counts().wrong == 1);
    CHECK(server->counts().members == 0);
  }
  SUBCASE("a stranger posing as the store, who cannot answer our challenge") {
    int fake_port = 0;
    const int listener = listen_at(htonl(INADDR_LOOPBACK), fake_port);
    std::thread impostor([&] {
      const int fd = accept(listener, nullptr, nullptr);
      const std::string greeting = encode_store_message({kStoreGreeting, std::string(16, 'c')});
      CHECK(send(fd, greeting.data(), greeting.size(), 0) == static_cast<ssize_t>(greeting.size()));
      char buffer[512];
      recv(fd, buffer, sizeof buffer, 0);
      const std::string proof = encode_store_message({"ok", std::string(32, 'p')});
      CHECK(send(fd, proof.data(), proof.size(), 0) == static_cast<ssize_t>(proof.size()));
      std::this_thread::sleep_for(200ms);
      close(fd);
    });
    CHECK_THROWS_WITH_AS(JobStore("127.0.0.1", fake_port, kSecret, 2s),
                         ("nano: the store at 127.0.0.1:" + std::to_string(fake_port) +
                          " could not prove it belongs to this job (its answer to our challenge is wrong): another "
                          "job's store holds the port")
                             .c_str(),
                         Error);
    impostor.join();
    close(listener);
  }
}

TEST_CASE("job store: before the server proved itself, a client takes no frame over 4 KiB") {
  // Whoever holds the port (a stranger, another job's store) could make every rank buffer up to
  // the members' bound (1 GiB) before the proof; now its first oversized frame ends the link.
  struct Row {
    const char* name;
    std::string greeting;  // what the impostor sends first
    std::string then;      // and after the rank's answer
    std::string expected;  // after "nano: 127.0.0.1:PORT is not this job's store: "
  };
  const std::string greeting = encode_store_message({kStoreGreeting, std::string(16, 'c')});
  const Row rows[] = {
      {"an oversized greeting", encode_store_message({kStoreGreeting, std::string(5000, 'c')}), "",
       "before proving it knows the job's secret, it sent a frame of 5020 bytes (at most 4096 are taken)"},
      {"a greeting, then a 1 MiB proof", greeting, std::string("\x00\x00\x10\x00", 4),
       "before proving it knows the job's secret, it sent a frame of 1048576 bytes (at most 4096 are taken)"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    int fake_port = 0;
    const int listener = listen_at(htonl(INADDR_LOOPBACK), fake_port);
    std::thread impostor([&] {
      const int fd = accept(listener, nullptr, nullptr);
      send(fd, row.greeting.data(), row.greeting.size(), MSG_NOSIGNAL);
      char buffer[512];
      if (!row.then.empty() && recv(fd, buffer, sizeof buffer, 0) > 0)
        send(fd, row.then.data(), row.then.size(), MSG_NOSIGNAL);
      closed_by_peer(fd, 3s);  // the rank ends the link at once, not after its timeout
      close(fd);
    });
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(
        JobStore("127.0.0.1", fake_port, kSecret, 5s),
        ("nano: 127.0.0.1:" + std::to_string(fake_port) + " is not this job's store: " + row.expected).c_str(), Error);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    impostor.join();
    close(listener);
  }
}

TEST_CASE("job store server: strangers are closed, a flood is bounded, members are served throughout") {
  const int port = free_port();
  StoreServerLimits limits;
  limits.answer_within = 400ms;
  limits.max_strangers = 16;
  auto server = std::make_shared<JobStoreServer>(port, kSecret, limits);
  JobStore member("127.0.0.1", port, kSecret, 5s, server);
  member.set("before", bytes("1"));

  SUBCASE("silent: closed once answer_within has passed") {
    const int fd = raw_connection(port);
    CHECK(closed_by_peer(fd, 2s));
    close(fd);
    CHECK(server->counts().late == 1);
  }
  SUBCASE("junk, a wrong answer, an oversized frame, a c10d client: closed at once") {
    for (const std::string& junk :
         {std::string("GET / HTTP/1.1\r\n\r\n"), encode_store_message({std::string(32, 'a'), std::string(16, 'b')}),
          encode_store_message({std::string(300, 'x')}),
          // TCPStore's client: a query type byte, then a key of 8-byte length
          std::string("\x00\x03\x00\x00\x00\x00\x00\x00\x00key", 12)}) {
      const int fd = raw_connection(port);
      send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
      CHECK(closed_by_peer(fd, 300ms));
      close(fd);
    }
    CHECK(server->counts().wrong >= 3);
    CHECK_FALSE(member.check({"key"}));  // nothing a stranger sent reached the keys
  }
  SUBCASE("a flood of connections: at most max_strangers stay; the member's requests keep being answered") {
    std::vector<int> flood;
    for (int i = 0; i < 200; ++i) flood.push_back(raw_connection(port));
    for (int i = 0; i < 50; ++i) CHECK(member.add("count", 1) == i + 1);
    CHECK(eventually([&] { return server->counts().crowded >= 200 - 16; }));
    int open = 0;
    for (int fd : flood) open += !closed_by_peer(fd, 200ms);
    CHECK(open <= 16);
    for (int fd : flood) close(fd);
    JobStore another("127.0.0.1", port, kSecret, 5s);  // a member still gets in at once
    CHECK(another.get("before") == bytes("1"));
  }
}
