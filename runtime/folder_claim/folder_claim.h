#pragma once
// One live owner per checkpoint folder. A job claims the folder with a claim file of the next
// generation, `.nano-owner.<generation>`, which it link()s into place whole: link() fails when
// the name is taken, so of two takers of one claim exactly one wins, and the claim of the highest
// generation is the live one. The holder rewrites its file with a heartbeat counter while it runs
// and removes it when it ends. A second job finds the claim and is refused before it trains; a
// claim whose owner is gone is taken over with one line, at the next generation:
//   - on this host, when its process (pid and start time) no longer runs;
//   - from another host, when its heartbeat counter did not move while this taker watched it
//     for kStaleAfter on its own clock: no two hosts' clocks are compared, and a file's time
//     says nothing (a copy, a clock step, a stopped job's old write).
// A holder that finds a higher generation than its own has lost the folder: it stops beating, and
// the Checkpointer, which checks the claim before every write and every prune, stops the job
// with one line naming the folder. Restarts of one job (nano-run --max-restarts, TorchNano's
// restarts) share the job's identity, so a restarted rank takes its predecessor's claim quietly.
//
// The decisions are pure (judge_claim, the names; table-tested); FolderClaim is the thin shell
// of files, a heartbeat thread and clocks around them.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nano/error.h>

namespace nano {

/// Who holds a folder: what a claim file says.
struct FolderOwner {
  std::string job;   ///< the job's identity (checkpoint_job_id())
  std::string host;  ///< gethostname() of the holding process
  /// Which kernel and pid namespace `pid` belongs to (boot id, pid namespace inode): two
  /// containers with one host name are not one host to a pid check.
  std::string machine;
  int64_t pid = 0;           ///< the holding process
  uint64_t start_ticks = 0;  ///< its start time (/proc/PID/stat field 22): a reused pid differs
  int64_t since = 0;         ///< when the claim was made (seconds since the epoch; only shown)
  uint64_t beat = 0;         ///< the heartbeat counter: the holder adds one every kHeartbeatEvery
};

/// The file's text, one "key value" per line; parse_owner() reads it back (nullopt when the text
/// is not a whole claim).
std::string format_owner(const FolderOwner& owner);
std::optional<FolderOwner> parse_owner(const std::string& text);

/// Claim files are kOwnerPrefix + the generation (1, 2, ...; decimal).
inline constexpr const char* kOwnerPrefix = ".nano-owner.";
/// Pure: the name of generation `generation`'s claim file.
std::string owner_file_name(uint64_t generation);
/// Pure: the generation a folder entry's name holds; nullopt for any other name.
std::optional<uint64_t> generation_of(const std::string& name);
/// Pure: the claim generations among a folder's entry names, highest first.
std::vector<uint64_t> claim_generations(const std::vector<std::string>& names);

/// How often a holder beats, and how long a taker watches another host's claim before it takes
/// it as abandoned: six missed heartbeats, so a busy NFS server or a loaded host is no reason.
inline constexpr std::chrono::seconds kHeartbeatEvery{5};
inline constexpr std::chrono::seconds kStaleAfter{30};

/// The claim's clocks (the defaults above; tests shorten them).
struct ClaimTimings {
  std::chrono::milliseconds beat_every = kHeartbeatEvery;
  std::chrono::milliseconds stale_after = kStaleAfter;
  std::chrono::milliseconds look_every{250};  ///< how often a watching taker reads the claim again
};

enum class ClaimVerdict {
  kFree,         ///< no whole claim: take the next generation
  kOurs,         ///< a claim of this job (a restart, or the launching process)
  kHeldByOther,  ///< another job's live claim: refuse
  kWatch,        ///< another host's claim not watched long enough yet: read it again later
  kStale,        ///< another job's claim whose owner is gone: take it over, saying so
};

/// What a taker knows of an existing claim besides its text.
struct ClaimFacts {
  /// Same host only: whether owner.pid runs with owner.start_ticks. Unknown across hosts.
  std::optional<bool> owner_running;
  /// Another host's claim: how long this taker has watched it, and whether its heartbeat
  /// counter (or its generation) moved meanwhile.
  std::chrono::milliseconds watched{0};
  bool beat_moved = false;
};

/// Pure: the verdict on `existing` (nullopt: no claim file, or one that is not a whole claim,
/// which no live owner leaves since claims are made whole) for job `job`. `facts.owner_running`
/// is known only where the owner is on this host and in this pid namespace (same_machine()).
ClaimVerdict judge_claim(const std::optional<FolderOwner>& existing, const ClaimFacts& facts, const std::string& job,
                         const ClaimTimings& timings = {});

/// This process's kernel and pid namespace, as FolderOwner::machine holds them.
std::string machine_id();

/// Pure: whether `owner`'s pid can be looked at from here: the same host name, kernel (boot id)
/// and pid namespace as `me`.
bool same_machine(const FolderOwner& owner, const FolderOwner& me);

/// Pure: whether a claim of this job should pass to the caller: its owner is a process of this
/// machine that is gone (a restarted rank replacing its predecessor). A live owner of the same job
/// (the launching process), or one on another machine, keeps it.
bool same_job_owner_gone(const ClaimFacts& facts);

/// This process's job identity: NANO_CHECKPOINT_JOB (set by an in-program launch for its ranks),
/// else, under one of nano's launchers (NANO_JOB_ID set), TORCHELASTIC_RUN_ID (nano-run's run id:
/// random per launch, the same on every restart), else one made for this process (host, pid,
/// start time). Another launcher's run id (torchrun's --rdzv-id) is a name a user chooses, which
/// two live jobs may share: it never makes two jobs one.
std::string checkpoint_job_id();

/// The line that refuses a job: names the folder and the owner (host, pid, since when).
std::string held_message(const std::string& dir, const FolderOwner& owner);

/// The line that stops a job whose claim another job took (`owner`, nullopt: the claim is gone).
std::string lost_message(const std::string& dir, const std::optional<FolderOwner>& owner);

/// A held (or, for a same-job live owner, merely checked) claim of one folder. Releasing removes
/// the file if it is still this process's.
class FolderClaim {
 public:
  /// Claims `dir` for checkpoint_job_id(). Throws UsageError(held_message) when another job's
  /// claim is live; prints one line to stderr when it takes over a stale one, and one when it
  /// watches another host's claim first (up to timings.stale_after).
  explicit FolderClaim(const std::string& dir, ClaimTimings timings = {});
  ~FolderClaim();
  FolderClaim(const FolderClaim&) = delete;
  FolderClaim& operator=(const FolderClaim&) = delete;
  /// Whether this process holds the file (false: the job's launching process does).
  bool holds() const;
  /// Throws Error(lost_message) when the folder's live claim is no longer this job's (another
  /// job took it over, or it was removed), ClaimUnreadable when the folder or its claim cannot
  /// be read now (a transient error: nothing is known then); reads the folder each time.
  void check() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// Throws UsageError(held_message) when another job certainly holds `dir` live (a running
/// process of this host); changes nothing. A claim of another host is judged by FolderClaim,
/// which watches it.
void check_folder_claim(const std::string& dir);

/// The folder or its claim could not be read (too many open files, an I/O error): whose claim is
/// live is unknown, not lost.
class ClaimUnreadable : public Error {
 public:
  using Error::Error;
};

/// Throws Error(lost_message) when the live claim of `dir` is not job `job`'s, ClaimUnreadable
/// when it cannot be read. For a rank that writes into a folder its launching process holds.
void check_claim_of_job(const std::string& dir, const std::string& job);

}  // namespace nano
