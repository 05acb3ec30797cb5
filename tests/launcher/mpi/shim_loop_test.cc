// The rank shim's loop on the fake system (fake_supervision_io.h): what it forwards, what it
// delivers, and when it gives its rank up, to the millisecond and without a process.
#include "launcher/mpi/shim_loop.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/process/timeouts.h"
#include "tests/launcher/fake_supervision_io.h"

using namespace nano;
using namespace std::chrono_literals;
using nano::test::FakeIo;
using nano::test::GroupSignal;
using std::chrono::milliseconds;

namespace {

constexpr int kLink = 10;
constexpr pid_t kRank = 300;
constexpr int kStdout = 20, kStderr = 21;

std::string frame(FrameType type, const std::string& payload = "") { return encode_frame(type, payload); }

// The frames the shim wrote to its link, in order.
std::vector<std::pair<FrameType, std::string>> frames_on_link(FakeIo& io) {
  FrameDecoder decoder;
  decoder.feed(io.written[kLink].data(), io.written[kLink].size());
  std::vector<std::pair<FrameType, std::string>> out;
  FrameType type;
  std::string payload;
  while (decoder.next(type, payload)) out.emplace_back(type, payload);
  return out;
}

// One shim's loop over a rank (kRank writing to kStdout and kStderr) on the fakes.
struct Shim {
  FakeIo io;
  ShimLoopSetup setup;
  FrameDecoder from_launcher;
  std::optional<ProcessEnd> reported;
  milliseconds reported_at{-1};

  explicit Shim(bool linked = true) {
    setup.link = linked ? kLink : -1;
    setup.rank = kRank;
    setup.output = {kStdout, kStderr};
    setup.stdout_fd = kStdout;
    setup.parent = io.parent_pid;
    setup.heartbeat_timeout = 4000ms;
    io.own(kRank, {kStdout, kStderr});
    io.catch_signals();
  }

  ShimLoopEnd run() {
    ShimLoop loop(setup, from_launcher, io, [this](const ProcessEnd& end) {
      REQUIRE_FALSE(reported);
      reported = end;
      reported_at = io.elapsed();
    });
    return loop.run();
  }

  // nano-run's heartbeats every second until `until`.
  void launcher_beats(milliseconds until) {
    for (milliseconds t = 1000ms; t < until; t += 1000ms)
      io.at(t, [this] { io.feed(kLink, frame(FrameType::kHeartbeat)); });
  }
};

}  // namespace

TEST_CASE("shim loop: the rank's output in frames, then its end, then the wait for nano-run's release") {
  Shim s;
  s.io.at(0ms, [&] { s.io.feed(kStdout, "hello\n"); });
  s.io.at(10ms, [&] { s.io.feed(kStderr, "careful\n"); });
  s.io.at(100ms, [&] { s.io.end(kRank, 3, 0); });
  s.io.at(500ms, [&] { s.io.feed(kLink, frame(FrameType::kRelease)); });

  const ShimLoopEnd end = s.run();

  CHECK(end.abandoned == ShimAbandon::kNone);
  CHECK(end.rank.exit_code == 3);
  REQUIRE(s.reported);
  CHECK(s.reported->exit_code == 3);
  CHECK(s.reported_at >= 100ms);
  CHECK(s.reported_at < 100ms + kShimPollInterval);
  CHECK(s.io.elapsed() >= 500ms);  // stayed until released
  CHECK(s.io.elapsed() < 500ms + kShimPollInterval);
  const auto frames = frames_on_link(s.io);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0] == std::pair<FrameType, std::string>{FrameType::kOut, "hello\n"});
  CHECK(frames[1] == std::pair<FrameType, std::string>{FrameType::kErr, "careful\n"});
  // The rank's group goes once the rank ended: no leftover keeps its pipes open.
  REQUIRE(s.io.group_signals.size() == 1);
  CHECK(s.io.group_signals[0].sig == SIGKILL);
  CHECK(s.io.closed.count(kStdout));
  CHECK(s.io.closed.count(kStderr));
}

TEST_CASE("shim loop: nano-run's signals and mpirun's reach the rank's group, continued if stopped") {
  Shim s;
  s.io.on_signal[kRank] = [&](int sig) {
    if (sig == SIGTERM) s.io.end(kRank, 0, SIGTERM);
  };
  s.io.at(20ms, [&] { s.io.raise(SIGINT); });  // mpirun's own
  s.io.at(50ms, [&] { s.io.feed(kLink, frame(FrameType::kSignal, std::to_string(SIGTERM))); });
  s.io.at(300ms, [&] { s.io.feed(kLink, frame(FrameType::kRelease)); });

  const ShimLoopEnd end = s.run();

  CHECK(end.abandoned == ShimAbandon::kNone);
  CHECK(end.rank.signal == SIGTERM);
  REQUIRE(s.reported);
  CHECK(s.reported->signal == SIGTERM);
  CHECK(s.io.group_signals == std::vector<GroupSignal>{{20ms, kRank, SIGINT},
                                                       {20ms, kRank, SIGCONT},
                                                       {50ms, kRank, SIGTERM},
                                                       {50ms, kRank, SIGCONT},
                                                       {50ms, kRank, SIGKILL}});
}

TEST_CASE("shim loop: it gives the rank up when nobody supervises it any more") {
  SUBCASE("its parent (mpirun or orted) is gone: at the next wake") {
    Shim s;
    s.launcher_beats(10s);
    s.io.at(1000ms, [&] { s.io.parent_pid = 1234; });
    const ShimLoopEnd end = s.run();
    CHECK(end.abandoned == ShimAbandon::kParentGone);
    REQUIRE(s.io.group_signals.size() == 1);
    CHECK(s.io.group_signals[0].sig == SIGKILL);
    CHECK(s.io.group_signals[0].at >= 1000ms);
    CHECK(s.io.group_signals[0].at <= 1000ms + kShimPollInterval);
    CHECK_FALSE(s.reported);
  }
  SUBCASE("nano-run silent for the heartbeat timeout (a cut link): beats sent all along") {
    Shim s;
    const ShimLoopEnd end = s.run();
    CHECK(end.abandoned == ShimAbandon::kLauncherSilent);
    CHECK(end.silence > 4000ms);
    CHECK(s.io.elapsed() <= 4000ms + kShimPollInterval);
    std::vector<FrameType> beats;
    for (const auto& f : frames_on_link(s.io)) beats.push_back(f.first);
    CHECK(beats == std::vector<FrameType>(4, FrameType::kHeartbeat));  // every timeout / 4
  }
  SUBCASE("nano-run's beats keep it: the rank runs to its end") {
    Shim s;
    s.launcher_beats(12s);
    s.io.at(10s, [&] { s.io.end(kRank, 0, 0); });
    s.io.at(11s, [&] { s.io.feed(kLink, frame(FrameType::kRelease)); });
    const ShimLoopEnd end = s.run();
    CHECK(end.abandoned == ShimAbandon::kNone);
    CHECK(s.io.elapsed() >= 11s);
  }
  SUBCASE("the link closed (nano-run killed): at once") {
    Shim s;
    s.io.at(700ms, [&] { s.io.end_stream(kLink); });
    const ShimLoopEnd end = s.run();
    CHECK(end.abandoned == ShimAbandon::kLauncherGone);
    CHECK(s.io.elapsed() == 700ms);
  }
  SUBCASE("bytes on the link that are no frame: not nano-run's") {
    Shim s;
    s.io.at(300ms, [&] { s.io.feed(kLink, "GET / HTTP/1.1\r\n"); });
    const ShimLoopEnd end = s.run();
    CHECK(end.abandoned == ShimAbandon::kLauncherGone);
  }
}

TEST_CASE("shim loop: without a link, it ends with its rank and writes what it sends to its own stdout/stderr") {
  Shim s(false);
  s.setup.output.clear();  // not captured: the rank writes to the shim's stdout itself
  s.io.at(250ms, [&] { s.io.end(kRank, 0, 9); });
  const ShimLoopEnd end = s.run();
  CHECK(end.abandoned == ShimAbandon::kNone);
  CHECK(end.rank.signal == 9);
  CHECK(s.io.elapsed() < 250ms + kShimPollInterval);  // no release to wait for
  CHECK(s.io.written.empty());                        // no heartbeat without a link

  FrameDecoder unused;
  ShimLoop loop(s.setup, unused, s.io, nullptr);
  loop.send(FrameType::kOut, "plain\n");
  loop.send(FrameType::kErr, "also plain\n");
  CHECK(s.io.written[1] == "plain\n");
  CHECK(s.io.written[2] == "also plain\n");
}

TEST_CASE("a shim that gives up takes down only an Open MPI daemon as its parent, never a subreaper") {
  for (const char* comm : {"orted", "prted", "mpirun", "mpiexec", "prterun", "prte"}) {
    CAPTURE(comm);
    CHECK(nano::is_open_mpi_parent(comm));
  }
  for (const char* comm : {"systemd", "init", "tini", "bash", "sshd", "orted2", "", "nano-run"}) {
    CAPTURE(comm);
    CHECK_FALSE(nano::is_open_mpi_parent(comm));
  }
}
