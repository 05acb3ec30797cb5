// The supervision loop on a fake system (launcher/supervise/supervision_io.h) and a fake starter: processes,
// pipes, shims' links and nano-run's signals are a script on a clock that moves only while the
// loop waits, so teardowns, deadlines and heartbeats are checked to the millisecond, in
// milliseconds, without a process.
#include "launcher/supervise/supervision_loop.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "launcher/prepare/port.h"
#include "launcher/process/timeouts.h"
#include "tests/launcher/fake_supervision_io.h"

using namespace nano;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

namespace {

using nano::test::FakeIo;
using nano::test::GroupSignal;
using nano::test::SentFrame;
using Clock = SupervisionIo::Clock;

struct Recorder : OutputSink {
  std::vector<std::string> out, err;
  void write(Stream s, const std::string& line) override { (s == Stream::kOut ? out : err).push_back(line); }
};

struct Delivery {
  milliseconds at;
  int sig;
  std::vector<pid_t> running;
  bool operator==(const Delivery& o) const { return at == o.at && sig == o.sig && running == o.running; }
};

// Starts what the test put in `started`; records what the loop asks of it. Delivering signals
// the running groups, as the subprocess starter does, unless the test reacts otherwise (the mpi
// backend's starter tells the shims instead).
class FakeStarter : public RankStarter {
 public:
  explicit FakeStarter(FakeIo& io) : io_(io) {}
  Started started;
  std::function<void(int sig, const Supervisor&)> react;
  std::vector<Delivery> deliveries;
  std::optional<std::vector<pid_t>> cleaned;
  milliseconds cleaned_at{-1};

  Started start() override { return started; }
  void deliver(int sig, const std::vector<pid_t>& running, const Supervisor& supervisor) override {
    deliveries.push_back({io_.elapsed(), sig, running});
    if (react)
      react(sig, supervisor);
    else
      for (pid_t g : running) io_.signal_group(g, sig);
  }
  void clean_up(const std::vector<pid_t>& groups) override {
    cleaned = groups;
    cleaned_at = io_.elapsed();
  }

 private:
  FakeIo& io_;
};

std::string frame(FrameType type, const std::string& payload = "") { return encode_frame(type, payload); }

// One world's loop on the fakes.
struct World {
  Setup s;
  LaunchOptions& o = s.options;  // the loop reads the options through its world
  Recorder rec;
  std::unique_ptr<OutputRouter> router;
  StdioSink stdio;  // nothing is written to it: the loop only polls it
  FakeIo io;
  FakeStarter starter{io};
  std::unique_ptr<SupervisionLoop> loop;

  World(int world_size, LaunchBackend backend, std::vector<HostSlots> hosts = {}) {
    s.world_size = world_size;
    s.backend = backend;
    s.hosts = std::move(hosts);
    router = std::make_unique<OutputRouter>(world_size, OutputConfig{}, rec);
    loop = std::make_unique<SupervisionLoop>(s, *router, stdio, io);
  }

  // Subprocess backend: rank r is process 100+r, writing to pipes 200+2r and 201+2r.
  static pid_t pid(int rank) { return 100 + rank; }
  static int out_fd(int rank) { return 200 + 2 * rank; }
  void forked_ranks() {
    for (int r = 0; r < s.world_size; ++r) {
      starter.started.processes.push_back({pid(r), r, out_fd(r), out_fd(r) + 1});
      io.own(pid(r), {out_fd(r), out_fd(r) + 1});
    }
  }

  // Mpi backend: mpirun is process 50 (pipes 300, 301), shims connect to 400, rank r's link is
  // 500+r once accepted.
  static constexpr pid_t kMpirun = 50;
  static int link(int rank) { return 500 + rank; }
  void mpirun() {
    starter.started.processes.push_back({kMpirun, -1, 300, 301});
    starter.started.listen_fd = 400;
    io.own(kMpirun, {300, 301});
    io.listen(400);
    loop->shims().set_secret(kSecret);
  }
  static constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";
  /// Rank `rank`'s shim connects at `when` and answers its challenge with the attempt's secret.
  void shim_says_hello(int rank, milliseconds when, const std::string& host) {
    io.on_challenge[link(rank)] = [this, rank, host](const std::string& challenge) {
      io.feed(link(rank), frame(FrameType::kHello, hello_payload(rank, host, shim_answer(kSecret, challenge, rank))));
    };
    io.at(when, [this, rank] { io.connect(link(rank)); });
  }
  void shim_reports_exit(int rank, int code, int sig) {
    io.feed(link(rank), frame(FrameType::kExit, exit_payload(code, sig)));
  }

  LaunchResult run() { return loop->run(starter); }

  /// nano-run's own lines, in order, without their newline.
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    for (const auto& line : rec.err)
      if (line.rfind("nano-run: ", 0) == 0) out.push_back(line.substr(0, line.size() - 1));
    return out;
  }
};

bool has_note_with(const std::vector<std::string>& notes, const std::string& part) {
  for (const auto& n : notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

// Failed checks print the lines and deliveries they compared.
namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& lines) {
    std::string text = "{";
    for (const auto& line : lines) text += "\n  \"" + line + "\"";
    return (text + "}").c_str();
  }
};
template <>
struct StringMaker<std::vector<Delivery>> {
  static String convert(const std::vector<Delivery>& deliveries) {
    std::string text = "{";
    for (const auto& d : deliveries) {
      text += " {" + std::to_string(d.at.count()) + " ms, signal " + std::to_string(d.sig) + ", groups";
      for (pid_t g : d.running) text += " " + std::to_string(g);
      text += "}";
    }
    return (text + " }").c_str();
  }
};
}  // namespace doctest

TEST_CASE("teardown order: the first failure, SIGTERM to the others, SIGKILL at the grace deadline") {
  World w(3, LaunchBackend::kSubprocess);
  w.forked_ranks();
  w.io.feed(World::out_fd(0), "step 1\n");
  w.io.at(10ms, [&] { w.io.end(World::pid(1), 3, 0); });
  // Rank 0 saves and goes 300 ms after its SIGTERM; rank 2 ignores SIGTERM.
  w.io.on_signal[World::pid(0)] = [&](int sig) {
    if (sig == SIGTERM) w.io.after(300ms, [&] { w.io.end(World::pid(0), 0, SIGTERM); });
  };
  w.io.on_signal[World::pid(2)] = [&](int sig) {
    if (sig == SIGKILL) w.io.end(World::pid(2), 0, SIGKILL);
  };

  const LaunchResult r = w.run();

  CHECK(w.starter.deliveries == std::vector<Delivery>{{10ms, SIGTERM, {World::pid(0), World::pid(2)}},
                                                      {10ms + w.o.grace_period, SIGKILL, {World::pid(2)}}});
  CHECK(w.starter.cleaned == std::vector<pid_t>{World::pid(0), World::pid(1), World::pid(2)});
  CHECK(w.starter.cleaned_at == 10ms + w.o.grace_period);  // the SIGKILLed rank is reaped at once
  CHECK(w.rec.out == std::vector<std::string>{"[rank 0] step 1\n"});
  CHECK(w.notes() ==
        std::vector<std::string>{
            "nano-run: rank 1 exited with code 3; stopping the other ranks",
            "nano-run: grace period over; killing the remaining ranks",
            "nano-run: root cause: rank 1 on " + host_name() + " exited with code 3; nano-run exits with 3",
        });
  CHECK(r.exit_code == 3);
  REQUIRE(r.failure);
  CHECK(r.failure->rank == 1);
  CHECK(r.interrupted_by == 0);
  // Every pipe was closed, and nano-run's signals are its own again.
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(w.io.closed.count(World::out_fd(rank)));
    CHECK(w.io.closed.count(World::out_fd(rank) + 1));
  }
  CHECK(w.io.caught);
  CHECK_FALSE(w.io.catching());
}

TEST_CASE("the grace deadline: kept to the millisecond, and no SIGKILL for ranks that end within it") {
  SUBCASE("a rank that ignores SIGTERM is killed when the grace period is over") {
    World w(2, LaunchBackend::kSubprocess);
    w.o.grace_period = 1234ms;  // not a multiple of the poll interval
    w.forked_ranks();
    w.io.at(40ms, [&] { w.io.end(World::pid(0), 1, 0); });
    w.io.on_signal[World::pid(1)] = [&](int sig) {
      if (sig == SIGKILL) w.io.end(World::pid(1), 0, SIGKILL);
    };
    const LaunchResult r = w.run();
    CHECK(w.starter.deliveries ==
          std::vector<Delivery>{{40ms, SIGTERM, {World::pid(1)}}, {40ms + 1234ms, SIGKILL, {World::pid(1)}}});
    CHECK(r.exit_code == 1);
  }
  SUBCASE("a rank that ends 1 ms before the deadline is not killed") {
    World w(2, LaunchBackend::kSubprocess);
    w.o.grace_period = 1234ms;
    w.forked_ranks();
    w.io.at(40ms, [&] { w.io.end(World::pid(0), 1, 0); });
    w.io.on_signal[World::pid(1)] = [&](int sig) {
      if (sig == SIGTERM) w.io.after(1233ms, [&] { w.io.end(World::pid(1), 0, SIGTERM); });
    };
    const LaunchResult r = w.run();
    CHECK(w.starter.deliveries == std::vector<Delivery>{{40ms, SIGTERM, {World::pid(1)}}});
    CHECK(w.starter.cleaned_at == 40ms + 1233ms);
    CHECK_FALSE(has_note_with(w.notes(), "grace period over"));
    CHECK(r.exit_code == 1);
  }
}

TEST_CASE("the first failure wins over later failures and over ranks stopped by the teardown") {
  World w(4, LaunchBackend::kSubprocess);
  w.forked_ranks();
  w.io.at(5ms, [&] { w.io.end(World::pid(2), 0, SIGSEGV); });
  // Rank 0 fails on its own 3 ms later, after the SIGTERM it ignored; rank 3 traps SIGTERM and
  // exits 143, as a trap in a shell script does; rank 1 dies of it.
  w.io.on_signal[World::pid(0)] = [](int) {};
  w.io.at(8ms, [&] { w.io.end(World::pid(0), 1, 0); });
  w.io.on_signal[World::pid(3)] = [&](int sig) {
    if (sig == SIGTERM) w.io.after(50ms, [&] { w.io.end(World::pid(3), 143, 0); });
  };

  const LaunchResult r = w.run();

  CHECK(w.starter.deliveries == std::vector<Delivery>{{5ms, SIGTERM, {World::pid(0), World::pid(1), World::pid(3)}}});
  CHECK(w.notes() == std::vector<std::string>{
                         "nano-run: rank 2 was killed by SIGSEGV; stopping the other ranks",
                         "nano-run: root cause: rank 2 on " + host_name() +
                             " was killed by SIGSEGV; nano-run exits with " + std::to_string(128 + SIGSEGV),
                     });
  CHECK(r.exit_code == 128 + SIGSEGV);
  REQUIRE(r.failure);
  CHECK(r.failure->rank == 2);
  CHECK(r.failure->signal == SIGSEGV);
  CHECK(w.starter.cleaned_at == 55ms);
}

TEST_CASE("signals to nano-run: forwarded as themselves, a second one kills, exit 130") {
  World w(2, LaunchBackend::kSubprocess);
  w.forked_ranks();
  w.io.at(20ms, [&] { w.io.raise(SIGINT); });
  w.io.at(700ms, [&] { w.io.raise(SIGINT); });
  // Rank 0 ends by the SIGINT (a failure of its own making, not a root cause); rank 1 ignores it.
  w.io.on_signal[World::pid(1)] = [&](int sig) {
    if (sig == SIGKILL) w.io.end(World::pid(1), 0, SIGKILL);
  };

  const LaunchResult r = w.run();

  CHECK(w.starter.deliveries ==
        std::vector<Delivery>{{20ms, SIGINT, {World::pid(0), World::pid(1)}}, {700ms, SIGKILL, {World::pid(1)}}});
  CHECK(w.notes() == std::vector<std::string>{
                         "nano-run: received SIGINT; forwarding it to every rank",
                         "nano-run: received SIGINT; forwarding it to every rank",
                         "nano-run: stopped by SIGINT; exit 130",
                     });
  CHECK(r.exit_code == 130);
  CHECK(r.interrupted_by == SIGINT);
  CHECK_FALSE(r.failure);
}

TEST_CASE("a stop the caller asks for (a tuning trial): SIGTERM at the next poll, no failure, exit 0") {
  World w(2, LaunchBackend::kSubprocess);
  w.forked_ranks();
  // The caller has measured enough from 250 ms on; both ranks end by the SIGTERM.
  w.o.stop_when = [&] { return w.io.elapsed() >= 250ms; };
  for (int rank = 0; rank < 2; ++rank)
    w.io.on_signal[World::pid(rank)] = [&w, rank](int sig) {
      if (sig == SIGTERM) w.io.after(20ms, [&w, rank] { w.io.end(World::pid(rank), 0, SIGTERM); });
    };

  const LaunchResult r = w.run();

  REQUIRE(w.starter.deliveries.size() == 1);
  CHECK(w.starter.deliveries[0].sig == SIGTERM);
  CHECK(w.starter.deliveries[0].at >= 250ms);
  CHECK(w.starter.deliveries[0].at <= 250ms + kPollInterval);
  CHECK(r.stopped);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(r.failure);
  CHECK(w.notes().empty());  // a stop is no news: no root cause, no interruption
}

TEST_CASE("a restart decision follows a failed world, never an interrupted or a clean one") {
  World failed(2, LaunchBackend::kSubprocess);
  failed.forked_ranks();
  failed.io.at(1ms, [&] { failed.io.end(World::pid(1), 7, 0); });
  const LaunchResult f = failed.run();
  CHECK(f.exit_code == 7);
  CHECK(should_restart(f.exit_code, f.interrupted_by, 0, 1));
  CHECK_FALSE(should_restart(f.exit_code, f.interrupted_by, 1, 1));

  World interrupted(2, LaunchBackend::kSubprocess);
  interrupted.forked_ranks();
  interrupted.io.at(1ms, [&] { interrupted.io.raise(SIGTERM); });
  const LaunchResult i = interrupted.run();
  CHECK(i.exit_code == 128 + SIGTERM);
  CHECK_FALSE(should_restart(i.exit_code, i.interrupted_by, 0, 5));

  World clean(2, LaunchBackend::kSubprocess);
  clean.forked_ranks();
  clean.io.at(1ms, [&] {
    clean.io.end(World::pid(0), 0, 0);
    clean.io.end(World::pid(1), 0, 0);
  });
  const LaunchResult c = clean.run();
  CHECK(c.exit_code == 0);
  CHECK(clean.starter.deliveries.empty());
  CHECK(clean.notes().empty());
  CHECK_FALSE(should_restart(c.exit_code, c.interrupted_by, 0, 5));
}

TEST_CASE("mpi backend: a shim not heard from within heartbeat_timeout is a lost host, exit 255") {
  World w(2, LaunchBackend::kMpi, {{host_name(), 1}, {"hostB", 1}});
  w.mpirun();
  w.shim_says_hello(0, 0ms, host_name());
  w.shim_says_hello(1, 0ms, "hostB");
  // Rank 0's shim beats every heartbeat_timeout / 4; rank 1's host goes silent after its hello.
  const milliseconds beat = w.o.heartbeat_timeout / kHeartbeatsPerTimeout;
  for (milliseconds t = beat; t < 2 * w.o.heartbeat_timeout; t += beat)
    w.io.at(t, [&] { w.io.feed(World::link(0), frame(FrameType::kHeartbeat)); });
  // The starter asks the shims to stop their ranks: rank 0's does, 20 ms later.
  w.starter.react = [&](int sig, const Supervisor& s) {
    if (sig == SIGTERM && !s.exited(0)) w.io.after(20ms, [&] { w.shim_reports_exit(0, 0, SIGTERM); });
  };
  // Released, rank 0's shim exits; mpirun waits for hostB's daemon it cannot reach, until killed.
  milliseconds released_at{-1};
  w.io.on_frame = [&](const SentFrame& f) {
    if (f.type != FrameType::kRelease) return;
    released_at = f.at;
    w.io.after(10ms, [&] { w.io.end_stream(World::link(0)); });
  };
  w.io.on_signal[World::kMpirun] = [&](int sig) {
    if (sig == SIGKILL) w.io.end(World::kMpirun, 0, SIGKILL);
  };

  const LaunchResult r = w.run();

  // Lost at the first look past the timeout; the teardown follows.
  const milliseconds lost_at = w.o.heartbeat_timeout + kPollInterval;
  REQUIRE(w.starter.deliveries.size() == 1);
  CHECK(w.starter.deliveries[0].at == lost_at);
  CHECK(w.starter.deliveries[0].sig == SIGTERM);
  const std::string why = "no word from its shim for 30 s: a cut link or a dead host";
  CHECK(w.notes() ==
        std::vector<std::string>{
            "nano-run: host hostB lost (rank 1 there; rank 1: " + why + "); stopping the other ranks",
            "nano-run: root cause: host hostB lost (rank 1 there; rank 1: " + why + "); nano-run exits with 255",
        });
  CHECK(r.exit_code == kLostHostExitCode);
  REQUIRE(r.failure);
  CHECK(r.failure->rank == 1);
  CHECK(r.failure->host == "hostB");
  CHECK(r.failure->lost == why);
  // nano-run's heartbeats reached both shims until rank 1 was lost, then rank 0's only.
  for (const SentFrame& f : w.io.frames_of(FrameType::kHeartbeat)) {
    CHECK(f.at.count() % beat.count() == 0);
    CHECK((f.fd == World::link(0) || f.at < lost_at));
  }
  CHECK(w.io.frames_of(FrameType::kHeartbeat).size() == 4 + 4);  // 7.5 s, 15 s, 22.5 s, 30 s to each
  // Released once rank 0 confirmed its end; mpirun got kMpirunEndAfterHostLost, not the 10 s.
  const auto releases = w.io.frames_of(FrameType::kRelease);
  REQUIRE(releases.size() == 1);
  CHECK(releases[0].fd == World::link(0));
  CHECK(released_at == lost_at + 20ms);
  REQUIRE(w.io.group_signals.size() == 1);
  CHECK(w.io.group_signals[0].pgid == World::kMpirun);
  CHECK(w.io.group_signals[0].sig == SIGKILL);
  CHECK(w.io.group_signals[0].at >= released_at + kMpirunEndAfterHostLost);
  CHECK(w.io.group_signals[0].at < released_at + kMpirunEndAfterHostLost + kPollInterval);
  CHECK(w.starter.cleaned == std::vector<pid_t>{World::kMpirun});
}

TEST_CASE("a shim's kStarted payload: the rank's pid and its start time") {
  struct Row {
    std::string payload;
    pid_t pid;
    unsigned long long start_time;
  };
  const std::vector<Row> table = {
      {started_payload({4000, 123456}), 4000, 123456},
      {"4000", 4000, 0},  // no start time: not known
      {"4000 x", 0, 0},
      {"x", 0, 0},
      {"", 0, 0},
      {"-5 1", 0, 0},
  };
  for (const Row& row : table) {
    CAPTURE(row.payload);
    const GroupLeader leader = parse_started(row.payload);
    CHECK(leader.pid == row.pid);
    CHECK(leader.start_time == row.start_time);
  }
  CHECK(started_payload({4000, 123456}) == "4000 123456");
}

TEST_CASE("mpi backend: an exit read in the drain after mpirun ended is the root cause, not mpirun") {
  SUBCASE("rank 1's final status arrives 200 ms after mpirun's end") {
    World w(2, LaunchBackend::kMpi);
    w.mpirun();
    w.shim_says_hello(0, 0ms, host_name());
    w.shim_says_hello(1, 0ms, host_name());
    // One host: the shims report their ranks' groups, which the guardian then watches (by the
    // leader's start time too, or without when a shim does not say it).
    w.io.at(1ms, [&] {
      w.io.feed(World::link(0), frame(FrameType::kStarted, started_payload({4000, 123456})));
      w.io.feed(World::link(1), frame(FrameType::kStarted, "4001"));
    });
    w.io.at(1000ms, [&] { w.io.end(World::kMpirun, 1, 0); });
    w.io.at(1200ms, [&] { w.shim_reports_exit(1, 3, 0); });
    w.starter.react = [](int, const Supervisor&) {};

    const LaunchResult r = w.run();

    CHECK(w.io.watched == std::vector<pid_t>{4000, 4001});
    CHECK(w.notes() ==
          std::vector<std::string>{
              "nano-run: rank 1 exited with code 3; stopping the other ranks",
              "nano-run: root cause: rank 1 on " + host_name() + " exited with code 3; nano-run exits with 3",
          });
    CHECK(r.exit_code == 3);
    REQUIRE(r.failure);
    CHECK(r.failure->rank == 1);
    // mpirun's end drains for kFinalDrain before its verdict; every rank counts as ended then,
    // and every shim is released.
    const auto releases = w.io.frames_of(FrameType::kRelease);
    REQUIRE(releases.size() == 2);
    CHECK(releases[0].at == 1000ms + kFinalDrain);
    CHECK(w.io.group_signals.empty());
  }
  SUBCASE("mpirun failing with no rank's status to blame is the root cause") {
    World w(2, LaunchBackend::kMpi);
    w.mpirun();
    w.shim_says_hello(0, 0ms, host_name());
    w.io.at(300ms, [&] {
      w.io.feed(301, "mpirun could not start rank 1\n");
      w.io.end(World::kMpirun, 1, 0);
    });
    const LaunchResult r = w.run();
    CHECK(w.notes() ==
          std::vector<std::string>{
              "nano-run: mpirun exited with code 1",
              "nano-run: root cause: mpirun on " + host_name() + " exited with code 1; nano-run exits with 1",
              "nano-run: last stderr lines of mpirun:",
          });
    CHECK(w.rec.err.front() == "[mpirun] mpirun could not start rank 1\n");
    CHECK(r.exit_code == 1);
    REQUIRE(r.failure);
    CHECK(r.failure->rank == -1);
    CHECK(w.starter.deliveries.empty());
  }
}

TEST_CASE("mpi backend: strangers on the shims' listener are closed without a word or an effect") {
  SUBCASE("a flood, a wrong answer, a replayed hello and a second link for a linked rank") {
    World w(2, LaunchBackend::kMpi, {{host_name(), 1}, {"hostB", 1}});
    w.mpirun();
    w.io.at(0ms, [&] {
      for (int fd = 1000; fd < 1300; ++fd) w.io.connect(fd);  // 300 connections that say nothing
    });
    w.shim_says_hello(0, 5ms, host_name());
    w.shim_says_hello(1, 5ms, "hostB");
    std::string rank0_hello;
    w.io.on_challenge[2000] = [&](const std::string&) {  // guesses
      w.io.feed(2000, frame(FrameType::kHello, hello_payload(1, "hostC", std::string(64, '0'))));
    };
    w.io.on_challenge[2001] = [&](const std::string&) {  // replays rank 0's hello, overheard
      w.io.feed(2001, rank0_hello);
    };
    w.io.on_challenge[2002] = [&](const std::string& challenge) {  // a second link for rank 1
      w.io.feed(2002, frame(FrameType::kHello, hello_payload(1, "hostC", shim_answer(World::kSecret, challenge, 1))));
    };
    w.io.at(50ms, [&] {
      for (const SentFrame& f : w.io.frames_of(FrameType::kChallenge))
        if (f.fd == World::link(0))
          rank0_hello =
              frame(FrameType::kHello, hello_payload(0, host_name(), shim_answer(World::kSecret, f.payload, 0)));
      w.io.connect(2000);
      w.io.connect(2001);
      w.io.connect(2002);
    });
    w.io.at(200ms, [&] {
      w.shim_reports_exit(0, 0, 0);
      w.shim_reports_exit(1, 0, 0);
    });
    w.io.on_frame = [&](const SentFrame& f) {
      if (f.type == FrameType::kRelease) w.io.after(1ms, [&, fd = f.fd] { w.io.end_stream(fd); });
      if (f.type == FrameType::kRelease && f.fd == World::link(1))
        w.io.after(5ms, [&] { w.io.end(World::kMpirun, 0, 0); });
    };

    const LaunchResult r = w.run();

    CHECK(r.exit_code == 0);
    CHECK(w.notes() == std::vector<std::string>{"nano-run: turned away 303 connection(s) to the shims' listener that "
                                                "did not answer the attempt's challenge"});
    // Every connection got a challenge of its own.
    std::set<std::string> challenges;
    for (const SentFrame& f : w.io.frames_of(FrameType::kChallenge)) challenges.insert(f.payload);
    CHECK(challenges.size() == w.io.frames_of(FrameType::kChallenge).size());
    CHECK(challenges.size() == 300 + 2 + 3);
    // Never more waiting for a hello than the bound (plus the two linked shims).
    CHECK(w.io.most_accepted_open <= kMaxShimsAwaitingHello + 2);
    // The three impostors went at once; rank 1 kept its own link.
    for (int fd : {2000, 2001, 2002}) {
      REQUIRE(w.io.closed_at.count(fd));
      CHECK(w.io.closed_at[fd] < 50ms + kPollInterval);
    }
    CHECK(w.io.closed_at[World::link(1)] > 200ms);
    // Nothing but the challenge went to a stranger.
    for (const SentFrame& f : w.io.frames)
      if (f.fd >= 1000) CHECK(f.type == FrameType::kChallenge);
  }
  SUBCASE("a connection that says nothing goes after kShimHelloWithin") {
    World w(1, LaunchBackend::kMpi, {{host_name(), 1}});
    w.mpirun();
    w.shim_says_hello(0, 0ms, host_name());
    w.io.at(1000ms, [&] { w.io.connect(1000); });
    const milliseconds end = kShimHelloWithin + 5s;
    for (milliseconds t = 5s; t < end; t += 5s)
      w.io.at(t, [&] { w.io.feed(World::link(0), frame(FrameType::kHeartbeat)); });
    w.io.at(end, [&] { w.shim_reports_exit(0, 0, 0); });
    w.io.on_frame = [&](const SentFrame& f) {
      if (f.type == FrameType::kRelease)
        w.io.after(1ms, [&] {
          w.io.end_stream(World::link(0));
          w.io.end(World::kMpirun, 0, 0);
        });
    };

    const LaunchResult r = w.run();

    CHECK(r.exit_code == 0);
    CHECK(w.notes() == std::vector<std::string>{"nano-run: turned away 1 connection(s) to the shims' listener that "
                                                "did not answer the attempt's challenge"});
    REQUIRE(w.io.closed_at.count(1000));
    CHECK(w.io.closed_at[1000] >= 1000ms + kShimHelloWithin);
    CHECK(w.io.closed_at[1000] <= 1000ms + kShimHelloWithin + kPollInterval);
  }
}
