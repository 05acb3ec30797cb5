#pragma once
// A fake system for the supervision loops (launcher/supervise/supervision_io.h): processes, pipes, links and
// signals are a script on a clock that moves only while a loop waits, so teardowns, deadlines
// and heartbeats are checked to the millisecond, in milliseconds, without a process. nano-run's
// loop (supervision_loop_test.cc) and the rank shim's (shim_loop_test.cc) run on it.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launcher/process/frames.h"
#include "launcher/supervise/supervision_io.h"

namespace nano::test {

using std::chrono::milliseconds;

using Clock = SupervisionIo::Clock;

constexpr int kSignalFd = 900;

struct SentFrame {
  milliseconds at;
  int fd;
  FrameType type;
  std::string payload;
};

struct GroupSignal {
  milliseconds at;
  pid_t pgid;
  int sig;
  bool operator==(const GroupSignal& o) const { return at == o.at && pgid == o.pgid && sig == o.sig; }
};

// The system as a script. Descriptors hold the bytes a test fed them (and an end of stream once
// their writer is gone); processes end when the script or a signal says so, which closes their
// pipes and raises SIGCHLD as on the real system; the clock moves only when poll() finds nothing
// ready, to the end of the wait or to the next scripted event.
class FakeIo : public SupervisionIo {
 public:
  const Clock::time_point start = Clock::time_point(std::chrono::hours(1));
  Clock::time_point t = start;

  // --- the script ---
  milliseconds elapsed() const { return std::chrono::duration_cast<milliseconds>(t - start); }
  void at(milliseconds when, std::function<void()> what) {
    timeline_.push_back({start + when, seq_++, std::move(what)});
  }
  void after(milliseconds delay, std::function<void()> what) { at(elapsed() + delay, std::move(what)); }
  void feed(int fd, const std::string& bytes) { input_[fd].push_back(bytes); }
  void end_stream(int fd) { eof_.insert(fd); }
  /// `pid` writes to `fds`: they end with it.
  void own(pid_t pid, std::vector<int> fds) { pipes_[pid] = std::move(fds); }
  void end(pid_t pid, int exit_code, int sig) {
    if (gone_.count(pid) || ends_.count(pid)) return;
    ends_[pid] = ProcessEnd{exit_code, sig};
    for (int fd : pipes_[pid]) end_stream(fd);
    if (catching_) signals_.push_back(SIGCHLD);
  }
  void raise(int sig) {
    if (catching_) signals_.push_back(sig);
  }
  void listen(int fd) { listen_fd_ = fd; }
  /// A shim connects: its link is `fd` once accepted.
  void connect(int fd) { accepts_.push_back(fd); }
  /// How a process takes a signal to its group; by default it ends by it (SIGCONT aside).
  std::map<pid_t, std::function<void(int)>> on_signal;
  /// Called for each frame the loop sends.
  std::function<void(const SentFrame&)> on_frame;
  /// By link: what the shim at its other end does with the challenge the loop sends it.
  std::map<int, std::function<void(const std::string&)>> on_challenge;

  // --- what the loop did ---
  std::vector<SentFrame> frames;
  std::vector<GroupSignal> group_signals;
  std::vector<pid_t> watched;
  std::set<int> closed;
  std::map<int, milliseconds> closed_at;
  /// By descriptor: the bytes written whole to it (a shim's frames, its plain output).
  std::map<int, std::string> written;
  /// What parent() says; a test changes it to have the parent go.
  pid_t parent_pid = 1;
  /// The most connections of the listener open at once, as the loop began a wait.
  size_t most_accepted_open = 0;
  bool caught = false;  // signals were caught at some point
  bool catching() const { return catching_; }

  std::vector<SentFrame> frames_of(FrameType type) const {
    std::vector<SentFrame> out;
    for (const auto& f : frames)
      if (f.type == type) out.push_back(f);
    return out;
  }

  // --- SupervisionIo ---
  void catch_signals() override { catching_ = caught = true; }
  void release_signals() override { catching_ = false; }
  int signal_fd() override { return kSignalFd; }
  std::vector<int> take_signals() override { return std::exchange(signals_, {}); }

  int poll(std::vector<pollfd>& fds, milliseconds timeout) override {
    // A loop that never ends is a failed test, not a hung one.
    if (++polls_ > 1000000 || t - start > std::chrono::hours(1)) throw std::runtime_error("the loop did not end");
    size_t open = 0;
    for (int fd : accepted_) open += !closed.count(fd);
    most_accepted_open = std::max(most_accepted_open, open);
    const auto until = t + timeout;
    for (;;) {
      run_due();
      const int n = ready(fds);
      if (n > 0 || t >= until) return n;
      const auto next = next_event();
      t = next && *next < until ? *next : until;
    }
  }

  long read(int fd, char* buffer, size_t size) override {
    auto& chunks = input_[fd];
    if (chunks.empty()) return eof_.count(fd) ? 0 : -1;
    std::string& front = chunks.front();
    const size_t n = std::min(size, front.size());
    std::copy(front.begin(), front.begin() + static_cast<long>(n), buffer);
    front.erase(0, n);
    if (front.empty()) chunks.erase(chunks.begin());
    return static_cast<long>(n);
  }

  bool send_frame(int fd, const std::string& frame) override {
    FrameDecoder decoder;
    decoder.feed(frame.data(), frame.size());
    FrameType type;
    std::string payload;
    REQUIRE(decoder.next(type, payload));
    frames.push_back({elapsed(), fd, type, payload});
    if (on_frame) on_frame(frames.back());
    auto shim = on_challenge.find(fd);
    if (type == FrameType::kChallenge && shim != on_challenge.end()) shim->second(payload);
    return true;
  }

  bool write_whole(int fd, const std::string& bytes) override {
    written[fd] += bytes;
    return true;
  }

  int accept(int listen_fd) override {
    if (listen_fd != listen_fd_ || accepts_.empty()) return -1;
    const int fd = accepts_.front();
    accepts_.erase(accepts_.begin());
    accepted_.push_back(fd);
    return fd;
  }
  void close(int fd) override {
    closed.insert(fd);
    closed_at.emplace(fd, elapsed());
  }

  std::optional<ProcessEnd> reap(pid_t pid) override {
    auto it = ends_.find(pid);
    if (it == ends_.end()) return std::nullopt;
    const ProcessEnd end = it->second;
    ends_.erase(it);
    gone_.insert(pid);
    return end;
  }
  void signal_group(pid_t pgid, int sig) override {
    group_signals.push_back({elapsed(), pgid, sig});
    auto it = on_signal.find(pgid);
    if (it != on_signal.end())
      it->second(sig);
    else if (sig != SIGCONT)
      end(pgid, 0, sig);
  }
  void watch_group(const GroupLeader& leader) override { watched.push_back(leader.pid); }
  Clock::time_point now() override { return t; }
  pid_t parent() override { return parent_pid; }

 private:
  struct Event {
    Clock::time_point when;
    int seq;
    std::function<void()> what;
  };

  void run_due() {
    for (;;) {
      auto first = timeline_.end();
      for (auto it = timeline_.begin(); it != timeline_.end(); ++it)
        if (it->when <= t &&
            (first == timeline_.end() || it->when < first->when || (it->when == first->when && it->seq < first->seq)))
          first = it;
      if (first == timeline_.end()) return;
      auto what = std::move(first->what);
      timeline_.erase(first);
      what();
    }
  }
  std::optional<Clock::time_point> next_event() const {
    std::optional<Clock::time_point> next;
    for (const auto& e : timeline_)
      if (!next || e.when < *next) next = e.when;
    return next;
  }
  int ready(std::vector<pollfd>& fds) {
    int n = 0;
    for (pollfd& p : fds) {
      p.revents = 0;
      if (p.fd < 0 || !(p.events & POLLIN)) continue;
      bool in;
      if (p.fd == kSignalFd)
        in = catching_ && !signals_.empty();
      else if (p.fd == listen_fd_)
        in = !accepts_.empty();
      else
        in = !input_[p.fd].empty() || eof_.count(p.fd);
      if (in) {
        p.revents = POLLIN;
        ++n;
      }
    }
    return n;
  }

  std::vector<Event> timeline_;
  int seq_ = 0;
  long polls_ = 0;
  std::map<int, std::vector<std::string>> input_;
  std::set<int> eof_;
  std::map<pid_t, std::vector<int>> pipes_;
  std::map<pid_t, ProcessEnd> ends_;
  std::set<pid_t> gone_;
  std::vector<int> signals_;
  std::vector<int> accepts_;
  std::vector<int> accepted_;
  int listen_fd_ = -1;
  bool catching_ = false;
};

}  // namespace nano::test
