#pragma once
// Every fixed wait of nano-run and its rank shim, in one place, each with why it is that long.
// The waits a user sets (the grace period, the heartbeat timeout, the restart delay) are
// settings (launcher/launch/launcher.h), not these.
#include <chrono>

namespace nano {

/// How often a waiting loop (supervision, the wait before a restart, the final output drain)
/// wakes when nothing happens, to check its deadlines: a deadline is kept to a tenth of a
/// second, and the loop costs nothing while it waits.
inline constexpr std::chrono::milliseconds kPollInterval{100};

/// How often the rank shim's loop wakes when nothing happens: it must notice that its parent
/// (mpirun or orted) is gone, which no descriptor tells, and send its heartbeats. One shim runs
/// per rank, so it wakes half as often as nano-run's single loop.
inline constexpr std::chrono::milliseconds kShimPollInterval{200};

/// Heartbeats per heartbeat timeout, on both sides of a shim's link: three in a row may be late
/// or lost before the other side gives up on the link.
inline constexpr int kHeartbeatsPerTimeout = 4;

/// How long a connection to nano-run's shim listener has to say a hello that answers its
/// challenge, and how long a shim waits for that challenge: a shim answers within a round trip,
/// so this only bounds what a stranger's connection (a port scan, a flood) may hold.
inline constexpr std::chrono::seconds kShimHelloWithin{10};

/// At most this many connections are taken from nano-run's shim listener per wake of the
/// supervision loop, so a flood of connections cannot keep the loop from its ranks.
inline constexpr int kShimAcceptsPerWake = 64;

/// An elastic launch (LaunchOptions::min_hosts): how long after mpirun started every rank's shim
/// must have said hello, at least (the heartbeat timeout when that is longer); a rank whose shim
/// has not by then counts as lost with its host ("its shim did not start"), so that the host can
/// be judged. mpirun waits for a daemon that cannot call back
/// (a host whose link is down) without a bound of its own; ssh and a daemon start in seconds
/// even on a loaded machine.
inline constexpr std::chrono::seconds kShimsStartWithin{30};

/// An elastic launch with rejoin: how often the hosts that left are asked whether they answer
/// again while a world runs (each ask: one launch-agent call per host, bounded by kProbeWithin).
inline constexpr std::chrono::seconds kRejoinAskEvery{5};

/// When a shim's link on nano-run's own host closes before its rank's status came, mpirun ended
/// that shim, mostly because it lost a daemon on another host (Open MPI 5 notices a cut link on
/// its own): a host silent for heartbeat_timeout / this is then taken as lost too, so the root
/// cause names it rather than the shim mpirun ended.
inline constexpr int kSilenceShareOnShimClose = 2;

/// After the first failure, how long a rank killed by SIGKILL that nano-run did not send (the
/// OOM killer, a user, a fault injection) may still take the root cause from it: across hosts a
/// peer that lost its connection to the killed rank can exit before the killed rank's shim
/// reports, and the peer's exit is the consequence. No library kills its own process with
/// SIGKILL, so a consequence does not take the root cause back; the teardown is not delayed.
inline constexpr std::chrono::milliseconds kRootCauseSettle{1500};

/// After every rank ended and the shims were released, how long mpirun gets to end before it is
/// SIGKILLed: its daemons report back and its session directory goes, which takes a few seconds
/// on a loaded machine.
inline constexpr std::chrono::seconds kMpirunEndAfterRelease{10};

/// As kMpirunEndAfterRelease, when a host was lost: mpirun then waits for a daemon it can no
/// longer reach, for many minutes, so it gets only the time to end its reachable daemons.
inline constexpr std::chrono::seconds kMpirunEndAfterHostLost{2};

/// After the ranks were SIGKILLed, how long their shims get to confirm the ends before mpirun is
/// SIGKILLed and takes the unconfirmed ones down with it.
inline constexpr std::chrono::seconds kMpirunEndAfterKill{5};

/// When mpirun ended (before its verdict is taken) and when supervision ends: how long the
/// channels still open are read for the last frames and output (the shims' final statuses come
/// before mpirun's verdict). Bytes already written arrive within it; a channel that stays open
/// does not hold nano-run longer.
inline constexpr std::chrono::milliseconds kFinalDrain{500};

/// How often the final drain wakes to check kFinalDrain's deadline: a fraction of it, so it is
/// kept closely.
inline constexpr std::chrono::milliseconds kFinalDrainPollInterval{50};

/// At the end of a launch, how long rank output that a slow reader has not taken yet is still
/// written before the rest is dropped (and counted in a note): a pager gets time to catch up, a
/// stalled one cannot keep nano-run from exiting.
inline constexpr std::chrono::seconds kOutputDrain{5};

/// How long the note about dropped output gets to reach the terminal after kOutputDrain.
inline constexpr std::chrono::seconds kOutputDrainNote{1};

/// How long nano-run waits for room to write a frame (a signal, the release, a heartbeat) to a
/// shim's link whose socket buffer is full: frames are a few bytes, so a full buffer means a
/// shim that stopped reading, and supervision must not wait on it for long.
inline constexpr std::chrono::milliseconds kShimFrameWrite{100};

/// `nano-run --tune`: what a trial may take, on top of what it measures, to start its ranks and
/// run its warm-up steps: a libtorch program loads in seconds, a first step (page faults, lazy
/// initialisation, a dataset read) can take tens of seconds on a large model.
inline constexpr std::chrono::seconds kTrialStartAllowance{60};

/// `nano-run --tune --tune-steps K`: the longest a trial measuring K steps may run after its
/// warm-up. A layout that slow is no contender; the trial is counted as failed.
inline constexpr std::chrono::seconds kTrialStepsBound{300};

/// `nano-run --tune`: how often a running trial's figures are read to see whether it measured
/// enough (a few small files, so it costs nothing).
inline constexpr std::chrono::milliseconds kTrialCheckInterval{200};

}  // namespace nano
