#pragma once
// The launch settings that every front end honours, one row each: nano-run's flag,
// TorchNanoOptions' field (and so the Python API's keyword), the LaunchOptions field the launcher
// reads, and the rank shims' spec. Each front end expands the list where it sees its own types:
//
//   core/setting.h, core/setting.cc          the Setting enumerator, its names and docs page
//   cli/options.cc                           the flag, its help and its parse
//   runtime/options/in_program_options.cc    TorchNanoOptions' field into LaunchOptions
//   python/launch.cc                         the keyword's setter; nano_torch learns the keywords
//   launcher/mpi/shim_spec.cc                the shims' JSON spec, out and in
//
// so adding such a setting is a row here, its LaunchOptions field (launcher/prepare/launch_types.h)
// and its TorchNanoOptions field (include/nano/torch_nano_options.h), and then the code where it acts
// (docs/developing.md, "Settings"). The fields' types pick the conversions: a bool is a flag, a
// std::string is text, an int a whole number >= 0, and a std::chrono::milliseconds is seconds on
// the command line and milliseconds (an int, "_ms") in TorchNanoOptions. A setting whose front
// ends differ more (num_processes' "auto", the backend's names) is written out by hand in each.
//
// A row: X(enumerator, key, flag, program field, LaunchOptions member, metavar, docs page, help)
//   key            setting_key(): the snake-case name errors' placeholders spell ({grace_period})
//   program field  TorchNanoOptions' field and the Python keyword
//   metavar        the value's name in nano-run --help ("" for a flag)
//   help           nano-run --help's line
// Header only, and without types, so that every front end expands it against its own types
// (the Python extension links the launcher like nano-run does, and expands it in launch.cc).
#define NANO_SHARED_SETTINGS(X)                                                                                       \
  X(kOversubscribe, oversubscribe, "--oversubscribe", oversubscribe, plan.oversubscribe, "", "docs/tuning.md",        \
    "Allow more ranks than cores")                                                                                    \
  X(kHostfile, hostfile, "--hostfile", hostfile, hostfile, "FILE", "docs/multihost.md",                               \
    "Open MPI hostfile (mpi backend)")                                                                                \
  X(kHosts, hosts, "--hosts", hosts, hosts, "HOST:SLOTS,...", "docs/multihost.md", "Several machines (mpi backend)")  \
  X(kLogDir, log_dir, "--log-dir", log_dir, log_dir, "DIR", "docs/nano-run.md",                                       \
    "Write rank-N.log per rank and summary.log here")                                                                 \
  X(kGracePeriod, grace_period, "--grace-period", grace_period_ms, grace_period, "SECONDS", "docs/failures.md",       \
    "Seconds between SIGTERM and SIGKILL at teardown (default 5)")                                                    \
  X(kHeartbeatTimeout, heartbeat_timeout, "--heartbeat-timeout", heartbeat_timeout_ms, heartbeat_timeout, "SECONDS",  \
    "docs/failures.md", "mpi backend: seconds without word from a rank's host before it counts as lost (default 30)") \
  X(kMaxRestarts, max_restarts, "--max-restarts", max_restarts, max_restarts, "INT", "docs/failures.md",              \
    "Start the whole world again after a rank fails, at most N times (default 0)")                                    \
  X(kRestartDelay, restart_delay, "--restart-delay", restart_delay_ms, restart_delay, "SECONDS", "docs/failures.md",  \
    "Seconds to wait before a restart (default 1)")                                                                   \
  X(kMinHosts, min_hosts, "--min-hosts", min_hosts, min_hosts, "INT", "docs/multihost.md",                            \
    "Go on without a lost host while INT hosts are left (0 = never; needs --max-restarts)")                           \
  X(kHostLostAfter, host_lost_after, "--host-lost-after", host_lost_after, host_lost_after, "INT",                    \
    "docs/multihost.md", "With --min-hosts: a host lost in INT attempts in a row leaves the world (default 2)")       \
  X(kRejoin, rejoin, "--rejoin", rejoin, rejoin, "", "docs/multihost.md",                                             \
    "With --min-hosts: a host that left and answers again is taken back at the next restart")                         \
  X(kBatchPolicy, batch_policy, "--batch-policy", batch_policy, batch_policy, "per-rank|global", "docs/multihost.md", \
    "When an elastic world changes: keep each rank's batch (per-rank, default) or the global batch")                  \
  X(kTimeline, timeline, "--timeline", timeline, timeline, "FILE", "docs/timeline.md",                                \
    "Record where every rank's time goes: a trace FILE (Perfetto, chrome://tracing) and a report at the end")

namespace nano {

#define NANO_SETTING_PROGRAM_FIELD(id, key, flag, field, member, metavar, docs, help) #field,
/// TorchNanoOptions' fields (the Python keywords) of the settings above, in the list's order.
inline constexpr const char* kSharedSettingFields[] = {NANO_SHARED_SETTINGS(NANO_SETTING_PROGRAM_FIELD)};
#undef NANO_SETTING_PROGRAM_FIELD

}  // namespace nano
