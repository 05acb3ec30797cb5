#pragma once
// The supervision rules as a pure state machine: which rank is the root cause, when to stop
// the others, when to escalate to SIGKILL, which failures are told as they happen, and
// nano-run's exit code. The supervision loop (launcher/supervise/supervision_loop.h) feeds it events (rank
// exits, signals, the grace deadline) and carries out the decisions; it decides none itself.
#include <optional>
#include <vector>

namespace nano {

/// What the launcher must do after an event.
struct Decision {
  enum Kind { kNone, kSignalAll, kKillAll };
  Kind kind = kNone;
  int signal = 0;            ///< for signal_all: the signal to send every remaining rank
  bool start_grace = false;  ///< arm the grace timer (SIGKILL when it expires)
  /// Tell the failure now, before the report at the end: the rank that ended is the root cause
  /// (rank_exited), or the backend failed with no rank to blame and no interruption so far
  /// (backend_exited; its verdict is told even when every rank had reported its end already).
  bool announce = false;
  /// The announced failure is the first: arm the settle window (kRootCauseSettle), after which
  /// settled() is due.
  bool start_settle = false;
  /// The announced failure takes the root cause from an earlier one (see rank_exited).
  bool replaces_root_cause = false;
};

/// The rank that failed first, how it ended.
struct RootCause {
  int rank = -1;  ///< -1: the launcher backend itself (mpirun) failed
  int exit_code = 0;
  int signal = 0;
};

class Supervisor {
 public:
  explicit Supervisor(int world_size);

  /// Rank `rank` ended with `exit_code` or by `signal`. The first non-zero end before any
  /// teardown is the root cause and starts a teardown with SIGTERM. Until settled(), a rank
  /// killed by SIGKILL before nano-run sent one takes the root cause from a first failure that
  /// exited with a code (that exit was its consequence: a peer's connection broke).
  Decision rank_exited(int rank, int exit_code, int signal);
  /// The settle window after the first failure ran out: the root cause is final.
  void settled() { settling_ = false; }
  /// The backend process (mpirun) ended: ranks that did not report are counted as ended; a
  /// failure of the backend with no rank to blame becomes the root cause (rank -1), unless
  /// every rank had already reported its end (then mpirun's verdict on them adds nothing).
  Decision backend_exited(int exit_code, int signal);
  /// nano-run received SIGINT, SIGTERM or SIGHUP: forward it; a second one while tearing
  /// down kills at once.
  Decision received_signal(int signal);
  /// The grace period after the first forwarded signal ran out.
  Decision grace_expired();
  /// The launch's caller asked the world to stop (a tuning trial measured enough): the ranks get
  /// SIGTERM as at an interruption, and how they end is nobody's failure (exit code 0), unless a
  /// rank had failed before.
  Decision stop_requested();

  bool tearing_down() const { return tearing_down_; }
  bool all_exited() const;
  /// True once `rank`'s end was reported (or the backend ended).
  bool exited(int rank) const;
  /// 0 when every rank exited 0; the root cause's code or 128+signal; 128+signal of the
  /// signal nano-run received (130 for SIGINT) when that came first.
  int exit_code() const;
  const std::optional<RootCause>& root_cause() const { return root_cause_; }
  int interrupted_by() const { return interrupted_by_; }
  bool stopped() const { return stopped_; }

 private:
  Decision start_teardown(int signal);
  std::vector<bool> exited_;
  std::optional<RootCause> root_cause_;
  int interrupted_by_ = 0;
  bool tearing_down_ = false;
  bool killed_ = false;
  bool stopped_ = false;
  bool settling_ = false;
};

/// Whether a world that ended with `exit_code` is started again: it failed (a rank or the
/// backend), the launcher was not interrupted (SIGINT, SIGTERM and SIGHUP are never restarted),
/// and fewer than `max_restarts` restarts were made so far.
bool should_restart(int exit_code, int interrupted_by, int restarts_done, int max_restarts);

}  // namespace nano
