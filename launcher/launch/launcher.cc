// The launcher library's entry points, composed from its parts: prepare a world
// (launcher/prepare/launch_setup.h), start it with the backend's RankStarter (launcher/supervise/rank_starter.h),
// supervise it (launcher/supervise/supervision_loop.h), and start it again after a failure while restarts are left,
// on the hosts that are left when the launch is elastic (launcher/launch/elastic.h).
#include "launcher/launch/launcher.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include <nano/error.h>
#include "launcher/launch/elastic_hosts.h"
#include "launcher/mpi/mpi_starter.h"
#include "launcher/prepare/job_files.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/port.h"
#include "launcher/process/guardian.h"
#include "launcher/process/output.h"
#include "launcher/process/signals.h"
#include "launcher/process/timeouts.h"
#include "launcher/supervise/subprocess_starter.h"
#include "launcher/supervise/supervision_loop.h"
#include "launcher/supervise/supervisor.h"
#include "launcher/timeline/timeline_merge.h"

namespace nano {
namespace {

using Clock = std::chrono::steady_clock;

// Ignores a signal for its lifetime (the launcher runs inside user programs too).
class ScopedIgnore {
 public:
  explicit ScopedIgnore(int sig) : sig_(sig) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(sig_, &ignore, &previous_);
  }
  ~ScopedIgnore() { sigaction(sig_, &previous_, nullptr); }
  ScopedIgnore(const ScopedIgnore&) = delete;
  ScopedIgnore& operator=(const ScopedIgnore&) = delete;

 private:
  int sig_;
  struct sigaction previous_ {};
};

// One world from start to end, with its guardian and its files.
LaunchResult run_world(const Setup& s, OutputRouter& router, StdioSink& sink) {
  Guardian guardian;
  const std::string shm_prefix = job_shm_prefix(s.job_id);
  guardian.remove_prefix("/dev/shm", shm_prefix);
  // The job's folders, made here: one that someone else made first is refused before anything
  // starts, and never handed to the guardian (it is not ours to remove).
  if (!s.job_dir.empty()) {
    make_private_folder(s.job_dir);
    guardian.remove_path(s.job_dir);
  }
  if (!s.session_dir.empty()) {
    try {
      make_private_folder(s.session_dir);  // on the other hosts, Open MPI's daemon makes it
    } catch (...) {
      if (!s.job_dir.empty()) remove_tree(s.job_dir.c_str());
      throw;
    }
    guardian.remove_path(s.session_dir);
  }
  for (const std::string& file : s.options.caller_files) guardian.remove_path(file);
  // Every group the world makes: signalled only while ours, watched by the guardian until it ended.
  OwnGroups groups(&guardian);
  SupervisionLoop loop(s, router, sink, groups);
  std::unique_ptr<RankStarter> starter =
      s.backend == LaunchBackend::kMpi ? make_mpi_starter(s, groups, loop.shims()) : make_subprocess_starter(s, groups);
  // Every rank's group is gone when the loop returns (or a failed start has taken down what it
  // started): remove what the job left, then let the guardian go.
  const auto remove_job_files = [&] {
    if (!s.job_dir.empty()) remove_tree(s.job_dir.c_str());
    if (!s.session_dir.empty()) remove_tree(s.session_dir.c_str());
    remove_with_prefix("/dev/shm", shm_prefix.c_str());
  };
  LaunchResult result;
  try {
    result = loop.run(*starter);
  } catch (...) {
    remove_job_files();
    throw;
  }
  remove_job_files();
  guardian.dismiss();
  return result;
}

// Waits `delay` before a restart; returns the signal (SIGINT, SIGTERM, SIGHUP) that cut the wait
// short, or 0. Output keeps flowing meanwhile.
int wait_before_restart(std::chrono::milliseconds delay, StdioSink& sink) {
  SignalPipe signals({SIGINT, SIGTERM, SIGHUP});
  const auto until = Clock::now() + delay;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return 0;
    std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}};
    for (const pollfd& out : sink.pollfds()) fds.push_back(out);
    poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, kPollInterval.count())));
    sink.flush_ready();
    for (int sig : signals.take()) return sig;
  }
}

std::string attempt_name(int restarts) { return "attempt-" + std::to_string(restarts); }

}  // namespace

LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv) {
  return launch(prepare(options, argv, Purpose::kLaunch));
}

LaunchResult launch(Setup s) {
  if (s.purpose != Purpose::kLaunch) throw Error("nano: launch() was given a dry run's plan");
  const LaunchOptions& options = s.options;
  if (!options.timeline.empty()) start_timeline(options.timeline);  // before any output file or rank
  StdioSink sink;
  OutputConfig config;
  config.tag = options.tag_output;
  config.show_ranks = options.output_ranks;
  config.log_dir = options.log_dir;
  config.terminal = !options.quiet;
  config.rank_offset = s.rank_offset;
  OutputRouter router(s.world_size, config, sink);
  for (const auto& note : s.notes) {
    const std::string text = worded_text(note, names_of(options.front_end));
    router.note(text.rfind("nano-run:", 0) == 0 ? text : "nano-run: note: " + text);
  }
  if (!s.warning.empty()) router.note(s.warning);
  // A closed reader of our output must not end the launch (EPIPE is handled where we write).
  ScopedIgnore no_sigpipe(SIGPIPE);
  LaunchResult result;
  ElasticHosts elastic(s);
  std::optional<Setup> next;  // an elastic restart's world on other hosts
  for (int restarts = 0;; ++restarts) {
    if (next) {
      s = std::move(*next);
      next.reset();
    } else if (restarts > 0) {
      renew_for_restart(s, restarts);
    }
    if (options.max_restarts > 0) router.start_attempt(attempt_name(restarts));
    elastic.watch(s, restarts);
    try {
      result = run_world(s, router, sink);
    } catch (...) {
      elastic.unwatch();
      throw;
    }
    elastic.unwatch();
    s.options.stop_at_checkpoint_when = nullptr;
    result.attempts = restarts + 1;
    if (!should_restart(result.exit_code, result.interrupted_by, restarts, options.max_restarts)) break;
    if (elastic.on()) {
      bool ended = false;
      next = elastic.judge(s, restarts, result, router, &ended);
      if (ended) break;
    }
    std::ostringstream delay;
    delay << options.restart_delay.count() / 1000.0;
    router.note("nano-run: restart " + std::to_string(restarts + 1) + " of " + std::to_string(options.max_restarts) +
                " in " + delay.str() + " s (attempt " + std::to_string(restarts + 1) +
                (result.stopped_at_checkpoint ? " stopped at its checkpoint, as asked)"
                                              : " ended with " + std::to_string(result.exit_code) + ")"));
    if (int sig = wait_before_restart(options.restart_delay, sink)) {
      router.note("nano-run: stopped by " + signal_name(sig) + " before the restart; exit " +
                  std::to_string(128 + sig));
      result.exit_code = 128 + sig;
      result.interrupted_by = sig;
      result.failure.reset();
      break;
    }
  }
  if (options.max_restarts > 0 && result.attempts > 1)
    router.note("nano-run: " + std::to_string(result.attempts) + " attempts; the last ended with " +
                std::to_string(result.exit_code));
  if (elastic.on()) {
    result.worlds = elastic.worlds();
    if (const std::string account = elastic.account(); !account.empty()) router.note(account);
  }
  if (!options.timeline.empty())
    for (const std::string& line :
         finish_timeline(options.timeline, kMaxRecordsFileBytes, elastic.by_attempt(result.attempts)))
      router.note(line);
  const std::string lost = sink.drain(kOutputDrain);
  if (!lost.empty()) {
    router.note(lost);
    sink.drain(kOutputDrainNote);
  }
  return result;
}

}  // namespace nano
