#pragma once
// What torchrun's agent tells every worker beyond who it is (torch.distributed.elastic's
// local_elastic_agent.py and multiprocessing/__init__.py), and what nano-run does in place of an
// agent: the attempt's variables (restart count, run id, a per-rank error file for
// torch.distributed.elastic.multiprocessing.errors.record), and the agent's own variables that
// must not reach the ranks because nothing nano-run runs would answer them.
#include <optional>
#include <string>
#include <vector>

#include "core/recipe.h"

namespace nano {

/// One attempt of a launch, as its ranks see it.
struct AttemptIdentity {
  std::string job_id;  ///< this attempt's NANO_JOB_ID (fresh on every restart: its own files)
  /// TORCHELASTIC_RUN_ID (torchrun's --rdzv-id): the same for every attempt of one launch and
  /// every node of it, as torchrun's is.
  std::string run_id;
  int restart_count = 0;  ///< 0, then 1, 2, ... after --max-restarts restarts
  int max_restarts = 0;   ///< --max-restarts
  /// NANO_JOB_SECRET (core/job_secret.h): fresh on every attempt, so a rank of an earlier one
  /// cannot join. It travels in environments only, never in a shim's spec (a command line).
  std::string secret;
  /// The job's private folder on this host (Setup::job_dir: a one-host job's), which the ranks'
  /// folders go inside; "" across hosts.
  std::string job_dir;
};

/// Pure: the folder (mode 0700) holding `rank`'s files of one attempt: "<job_dir>/rank-<rank>",
/// inside the job's private folder, where nobody else can make it first; across hosts (no job
/// folder) "/dev/shm/nano-<job_id>-rank-<rank>", named under the job's "nano-<job_id>-" prefix,
/// so nano-run (or its guardian) removes it with the job's other files on every way a job ends on
/// nano-run's host; on other hosts the rank's shim removes it. One folder per rank: each has
/// exactly one owner.
std::string rank_files_dir(const AttemptIdentity& attempt, int rank);

/// Pure: rank_files_dir(attempt, rank) + "/error.json", the rank's TORCHELASTIC_ERROR_FILE.
std::string error_file_path(const AttemptIdentity& attempt, int rank);

/// Pure: the variables of `attempt` for global rank `rank`: NANO_JOB_ID, NANO_RESTART_COUNT and
/// TORCHELASTIC_RESTART_COUNT (both the restart count), TORCHELASTIC_MAX_RESTARTS,
/// TORCHELASTIC_RUN_ID and TORCHELASTIC_ERROR_FILE (error_file_path), and NANO_JOB_SECRET when
/// the attempt has a secret. Empty for an attempt without a job id (a dry run starts nothing).
Environment attempt_variables(const AttemptIdentity& attempt, int rank);

/// The agent's variables nano-run takes out of every rank's environment, whoever set them.
struct DroppedVariables {
  std::vector<std::string> names;  ///< in the order dropped
  std::string warning;             ///< one line naming them with their values; "" when none
};

/// Pure: removes from `env` what would point a rank at a torchelastic agent nano-run does not
/// run. TORCHELASTIC_USE_AGENT_STORE: "True" makes torch's env:// rendezvous a client of the
/// agent's store on every rank, rank 0 included, so the world would wait for a server that is
/// not there. TORCHELASTIC_ENABLE_FILE_TIMER: asks the agent for a watchdog (FileTimerServer);
/// with it "1", TORCHELASTIC_TIMER_FILE names that server's pipe and goes too (without it, the
/// file is a server of the user's own and is kept, as torchrun keeps it).
DroppedVariables drop_agent_variables(Environment& env);

/// What torch's ErrorHandler.record_exception wrote, as nano-run reports it.
struct RaisedError {
  std::string message;  ///< "RuntimeError: boom" (the exception's type and text)
  std::string where;    ///< "train.py:12 in main": the innermost frame of the traceback; "" if none
};

/// Pure: reads torch's error file JSON, {"message": {"message": "RuntimeError: boom",
/// "extraInfo": {"py_callstack": "<traceback>", "timestamp": "..."}}} (also the plain
/// {"message": "..."} form torch accepts); nullopt when `text` is not such JSON.
std::optional<RaisedError> parse_error_file(const std::string& text);

/// The rank's error file, at most `limit` bytes of it; nullopt when it does not exist or is
/// empty (the rank raised nothing through `record`).
std::optional<std::string> read_error_file(const std::string& path, size_t limit = 4u << 20);

/// Creates rank_files_dir(attempt, rank) (make_private_folder: mode 0700; an existing one is
/// refused with a UsageError naming it: not ours).
/// Throws Error naming the folder when it cannot.
void make_rank_files_dir(const AttemptIdentity& attempt, int rank);

}  // namespace nano
