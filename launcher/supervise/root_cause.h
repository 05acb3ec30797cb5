#pragma once
// nano-run's account of how a world ended, as a pure function of what supervision learned: the
// root cause (launcher/supervise/supervisor.h), where each rank ran, which hosts were lost and why, and the
// root cause's last stderr lines. Kept apart from the loop that gathers them, so every wording
// (matched by users' scripts and the fault tests) is checked by a table test.
#include <optional>
#include <string>
#include <vector>

#include "launcher/prepare/launch_types.h"
#include "launcher/prepare/torchrun_env.h"
#include "launcher/supervise/supervisor.h"

namespace nano {

/// "was killed by SIGKILL" or "exited with code 3".
std::string describe_end(int exit_code, int signal);

/// Why `rank` (world-local, 0-based) counts as ended with its host, given `hosts` (by rank) and
/// `lost` (by rank, "" = not lost): on `this_host`, which is not lost,
/// "rank 0's shim on hostA ended without the rank's status (<why>)"; elsewhere
/// "host hostB lost (ranks 1,3 there; rank 1: <why>)".
std::string describe_lost(int rank, const std::vector<std::string>& hosts, const std::vector<std::string>& lost,
                          const std::string& this_host);

/// "RuntimeError: boom (at train.py:12 in main)": the exception's first line (cut at 200
/// characters; " [...]" marks a cut or further lines, which its stderr tail shows), and where it
/// was raised when the traceback says.
std::string describe_raised(const RaisedError& raised);

/// When the root cause (`waiter`, world rank) failed because a peer left while it waited in a
/// collective, as its last stderr lines say ("nano: rank 1 (pid 7) exited after its collective
/// #5 while this rank waited in all_reduce(float32[4], SUM) #6"), the line that names the leaver:
/// "rank 1 exited with code 0 after its collective #5 while rank 0 waited in
/// all_reduce(float32[4], SUM) #6: rank 1 left early, or rank 0 called one collective more"
/// (how it ended from `ends`, by world-local rank, offset by `rank_offset`; "left" when unknown).
/// "" when the tail names no leaver.
std::string describe_leaver(int waiter, const std::vector<std::string>& stderr_tail,
                            const std::vector<std::string>& ends, int rank_offset);

/// What the report is made from.
struct EndFacts {
  std::optional<RootCause> root_cause;   ///< the first failure (rank -1: mpirun); none = no failure
  int interrupted_by = 0;                ///< the signal nano-run received first; 0 = none
  int exit_code = 0;                     ///< nano-run's exit code (Supervisor::exit_code)
  int rank_offset = 0;                   ///< added to printed ranks (one node's part of a Slurm step)
  std::vector<std::string> hosts;        ///< by rank: where it ran
  std::vector<std::string> lost;         ///< by rank: why its host counts as lost ("" = not)
  std::string this_host;                 ///< nano-run's host (mpirun's)
  std::vector<std::string> stderr_tail;  ///< the root cause's last stderr lines
  std::string error_file;                ///< the root cause's torchelastic error file (JSON); "" = none
  bool restart_follows = false;          ///< --max-restarts starts the world again after this attempt
  bool elastic = false;                  ///< --min-hosts: whether it does depends on the hosts left
  std::vector<std::string> ends;         ///< by rank: how it ended (describe_end); "" = not reported
  std::vector<bool> started;             ///< by rank: its shim said hello (mpi backend); empty = unknown
};

/// Pure: the hosts an attempt that ended as `facts` tell lost, each once, in rank order, never
/// `this_host`: the root cause's host when the root cause is a lost rank there, and — when the
/// root cause is a lost host or mpirun itself, and some shim did start — every host none of whose
/// shims started ("its shims did not start": mpirun could not start them there). When no shim
/// started anywhere, mpirun failed as a whole and no host is named.
/// Ranks lost after the root cause are its consequences, not losses of their hosts.
std::vector<LostHost> hosts_lost(const EndFacts& facts);

/// The failure to return and the lines nano-run prints at the end.
struct EndReport {
  std::optional<RankFailure> failure;
  std::vector<std::string> lines;
};

/// "nano-run: root cause: rank 1 on hostA was killed by SIGKILL; nano-run exits with 137" (or the
/// lost-host form; "...; a restart follows" instead when one does: nano-run does not exit), then
/// "nano-run: " + describe_leaver(...) when that names a peer that left early, then, when its error file
/// is torch's JSON, "nano-run: rank 1 raised RuntimeError: boom (at train.py:12 in main)" (describe_raised), then
/// "nano-run: last stderr lines of rank 1:" and "  | <line>" for each tail line; with no root cause but an interruption
/// "nano-run: stopped by SIGINT; exit 130"; else nothing.
EndReport report_end(const EndFacts& facts);

}  // namespace nano
