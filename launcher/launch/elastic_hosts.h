#pragma once
// The effectful side of an elastic launch (LaunchOptions::min_hosts) between and during attempts:
// it asks the hosts (launcher/launch/host_probe.h) after a failed attempt and judges them
// (launcher/launch/elastic.h, pure), says what it decided and plans the next world when it
// changes (prepare_on_hosts); with rejoin it watches the hosts out of the world while one runs,
// on a thread of its own, and asks the world to stop at its next checkpoint once one answers.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/launch/elastic.h"
#include "launcher/launch/host_probe.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/process/output.h"

namespace nano {

/// An elastic launch's hosts, from its first Setup to its end. Inert when the launch is not
/// elastic (on() is false).
class ElasticHosts {
 public:
  explicit ElasticHosts(const Setup& s);
  ~ElasticHosts();
  ElasticHosts(const ElasticHosts&) = delete;
  ElasticHosts& operator=(const ElasticHosts&) = delete;
  bool on() const { return on_; }
  const std::vector<WorldChange>& worlds() const { return worlds_; }

  /// With rejoin, while attempt `restarts` of `s` runs and restarts are left: the hosts out of its
  /// world (left, or sitting out for not answering) are asked every kRejoinAskEvery, on a thread
  /// of its own, and once one answers the world is asked to stop at its next checkpoint
  /// (sets s.options.stop_at_checkpoint_when), where the restart takes it back (judge()).
  void watch(Setup& s, int restarts);
  /// The watch of the attempt that ended, over (the thread joined).
  void unwatch();

  /// After failed (or stopped) attempt `restarts` of `s`: the next world (nullopt: the same
  /// hosts), or, when too few hosts are left or the world cannot be planned, *ended = true and
  /// `result` made the launch's end (255 naming the lost hosts when the attempt lost one).
  std::optional<Setup> judge(const Setup& s, int restarts, LaunchResult& result, OutputRouter& router, bool* ended);

  /// The world of every attempt of `attempts`, for the timeline (TimelineReport::worlds); empty
  /// when the launch is not elastic.
  std::vector<std::string> by_attempt(int attempts) const;

  /// The final report's line on every world ("nano-run: worlds: ..."), "" with only one.
  std::string account() const;

 private:
  bool on_;
  ElasticPolicy policy_;
  ProbeWay way_;
  std::vector<HostStanding> standing_;
  std::vector<WorldChange> worlds_;
  std::thread watcher_;  // asks the hosts out of the world while it runs (watch())
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> answered_{false};
};

}  // namespace nano
