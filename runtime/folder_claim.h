#pragma once
// One live owner per checkpoint folder. A job claims the folder by creating `.nano-owner` in it
// (atomically: a finished file is link()ed into place, which fails when one is there), keeps the
// file's modification time fresh while it runs, and removes it when it ends. A second job finds
// the claim and is refused before it trains; a claim whose owner is gone (a dead process on this
// host, or no heartbeat for kStaleAfter from another host of a shared file system) is taken
// over with one line. Restarts of one job (nano-run --max-restarts, TorchNano's restarts) share
// the job's identity, so a restarted rank keeps its job's claim.
//
// The decision is pure (judge_claim, table-tested); FolderClaim is the thin shell of files, a
// heartbeat thread and clocks around it.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace nano {

/// Who holds a folder: what `.nano-owner` says.
struct FolderOwner {
  std::string job;           ///< the job's identity (checkpoint_job_id())
  std::string host;          ///< gethostname() of the holding process
  int64_t pid = 0;           ///< the holding process
  uint64_t start_ticks = 0;  ///< its start time (/proc/PID/stat field 22): a reused pid differs
  int64_t since = 0;         ///< when the claim was made (seconds since the epoch)
};

/// The file's text, one "key value" per line; parse_owner() reads it back (nullopt when the text
/// is not a whole claim).
std::string format_owner(const FolderOwner& owner);
std::optional<FolderOwner> parse_owner(const std::string& text);

/// The claim file's name inside a checkpoint folder.
inline constexpr const char* kOwnerFile = ".nano-owner";
/// How often a holder refreshes its claim, and how old a claim of another host must be to be
/// taken as abandoned: six missed heartbeats, so a busy NFS server or a loaded host is no reason.
inline constexpr std::chrono::seconds kHeartbeatEvery{5};
inline constexpr std::chrono::seconds kStaleAfter{30};

enum class ClaimVerdict {
  kFree,         ///< no claim: create one
  kOurs,         ///< a claim of this job (a restart, or the launching process): keep it
  kHeldByOther,  ///< another job's live claim: refuse
  kStale,        ///< another job's claim whose owner is gone: take it over, saying so
};

/// What is known of an existing claim besides its text.
struct ClaimFacts {
  double heartbeat_age_s = 0;  ///< now minus the file's modification time
  /// Same host only: whether owner.pid runs with owner.start_ticks. Unknown across hosts.
  std::optional<bool> owner_running;
};

/// Pure: the verdict on `existing` (nullopt: no claim file, or one that is not a whole claim,
/// which no live owner leaves since claims are made whole) for job `job` on host `host`.
ClaimVerdict judge_claim(const std::optional<FolderOwner>& existing, const ClaimFacts& facts, const std::string& job,
                         const std::string& host);

/// Whether a claim of this job should pass to the caller: its owner is gone (a restarted rank
/// replacing its predecessor). A live owner of the same job (the launching process) keeps it.
bool same_job_owner_gone(const FolderOwner& existing, const ClaimFacts& facts, const std::string& host);

/// This process's job identity: NANO_CHECKPOINT_JOB (set by an in-program launch for its ranks),
/// else TORCHELASTIC_RUN_ID (nano-run's and torchrun's run id, the same on every restart; not
/// torchrun's default "none", which every job shares), else one made for this process (host,
/// pid, start time).
std::string checkpoint_job_id();

/// The line that refuses a job: names the folder and the owner (host, pid, since when).
std::string held_message(const std::string& dir, const FolderOwner& owner);

/// A held (or, for a same-job live owner, merely checked) claim of one folder. Releasing removes
/// the file if it is still this process's.
class FolderClaim {
 public:
  /// Claims `dir` for checkpoint_job_id(). Throws UsageError(held_message) when another job's
  /// claim is live; prints one line to stderr when it takes over a stale one.
  explicit FolderClaim(const std::string& dir);
  ~FolderClaim();
  FolderClaim(const FolderClaim&) = delete;
  FolderClaim& operator=(const FolderClaim&) = delete;
  /// Whether this process holds the file (false: the job's launching process does).
  bool holds() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Throws UsageError(held_message) when another job holds `dir` live; changes nothing.
void check_folder_claim(const std::string& dir);

}  // namespace nano
