#pragma once
// One world's supervision, the same for both backends: poll the ranks' (and mpirun's) output,
// the shims' links and nano-run's signals; reap processes; feed every event to the pure
// Supervisor (launcher/supervise/supervisor.h) and carry out its decisions through the RankStarter; run the
// grace and mpirun deadlines, the heartbeats and the lost-host detection; report the end.
// Every system call goes through a SupervisionIo (launcher/supervise/supervision_io.h), so tests run the loop
// on a fake one.
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/prepare/launch_setup.h"
#include "launcher/process/output.h"
#include "launcher/process/process_group.h"
#include "launcher/supervise/heartbeat.h"
#include "launcher/supervise/rank_starter.h"
#include "launcher/supervise/shim_channels.h"
#include "launcher/supervise/supervision_io.h"
#include "launcher/supervise/supervisor.h"

namespace nano {

class SupervisionLoop : private ShimEvents {
 public:
  /// Supervises through the system's calls; the processes' groups are `groups` (those its
  /// starter made, and the ones the shims report on this host, which it adds).
  SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink, OwnGroups& groups);
  /// Supervises through `io` (a test's fake).
  SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink, SupervisionIo& io);

  /// The shims' links of this world, for the mpi backend's starter.
  ShimChannels& shims() { return shims_; }

  /// Starts the world with `starter` and supervises it until every process it started is gone;
  /// prints the root cause (or the interruption) and returns the outcome. Throws Error when the
  /// world cannot start (nothing of it is left running then).
  LaunchResult run(RankStarter& starter);

 private:
  using Clock = SupervisionIo::Clock;
  struct Child {
    pid_t pid;
    int rank;  // -1 = the backend (mpirun)
    bool running;
  };

  SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink, std::unique_ptr<SupervisionIo> owned,
                  SupervisionIo* given);

  void rank_started_here(int rank, const GroupLeader& leader) override;
  void rank_ended(int rank, int code, int sig) override;

  void add_pipe(int fd, int rank, Stream stream);
  void deliver(int sig);
  void release_shims();
  void apply(const Decision& d);
  void lose_rank(int rank, const std::string& why);
  void lose_silent_hosts(std::chrono::milliseconds silence);
  void heartbeat();
  void ask_to_stop_at_checkpoint();
  std::vector<std::string> hosts_by_rank() const;
  bool read_channel(Channel& ch);
  void accept_shims();
  void drop_strangers();
  void poll_once(std::chrono::milliseconds timeout);
  bool reap();
  void drain();
  void loop();
  LaunchResult finish();

  const Setup& setup_;
  OutputRouter& router_;
  StdioSink& sink_;
  std::unique_ptr<SupervisionIo> owned_io_;  // the system's; none when given one
  SupervisionIo& io_;
  Supervisor supervisor_;
  ShimChannels shims_;
  RankStarter* starter_ = nullptr;
  std::vector<std::string> lost_;  // by rank: why its host counts as lost ("" = not)
  std::vector<std::string> ends_;  // by rank: how it ended (describe_end); "" = not yet
  Heartbeat beat_;                 // the sending side of the shims' heartbeat
  pid_t backend_pid_ = -1;         // mpirun, when the backend runs one
  std::optional<Clock::time_point> mpirun_deadline_;
  std::vector<Child> children_;
  std::vector<std::unique_ptr<Channel>> channels_;
  int listen_fd_ = -1;
  bool stop_asked_ = false;            // LaunchOptions::stop_at_checkpoint_when said so; the ranks were sent the signal
  Clock::time_point last_stop_ask_{};  // when the ranks were last sent the signal
  Clock::time_point started_at_{};     // when the starter returned: the shims' start bound counts from it
  size_t strangers_ = 0;               // connections to the listener closed without a hello that answered
  std::optional<Clock::time_point> deadline_;
  std::optional<Clock::time_point> settle_deadline_;  // the root cause may still change until then
};

}  // namespace nano
