#pragma once
// The names of what one attempt of a job leaves on a host, spelled once: nano's shared memory
// and every rank's folder are "/dev/shm/nano-<job>-...", the job's private folder on one host
// (the runtime's rendezvous store, Open MPI's files of a one-host job) "/dev/shm/nano-<job>/".
// The launcher (and its guardian) remove them by these names. The names are unpredictable and
// every folder is made here, 0700, refusing one that someone else made first: a job's files are
// its own, never shared.
#include <sys/stat.h>
#include <sys/types.h>

#include <string>

namespace nano {

/// A name for one attempt's files, unique on this host and unpredictable to others:
/// "<pid>-<16 random hex digits>".
std::string make_job_id();

/// Pure: "nano-<job_id>-", the prefix of the job's entries in /dev/shm.
std::string job_shm_prefix(const std::string& job_id);

/// Pure: "/dev/shm/nano-<job_id>", the private folder of a one-host job (Setup::job_dir): the
/// ranks' NANO_JOB_DIR, and where Open MPI puts its files when it runs the job.
std::string job_dir_of(const std::string& job_id);

/// Pure: "/tmp/nano-<job_id>", where Open MPI puts its session directories on every host of a
/// job over several hosts (/dev/shm may be small there, and is private to each host anyway).
std::string hosts_session_dir_of(const std::string& job_id);

/// Pure: the marker a rank shim keeps in `session_dir` while its rank runs; the last shim of a
/// host to end removes `session_dir` when no other marker is left.
std::string shim_marker_of(const std::string& session_dir, int rank);

/// Pure: what keeps a folder whose lstat() is `st` from being a private folder of user `uid`:
/// "" when it is one (a folder, not a symbolic link, owned by `uid`, mode 0700), else the reason,
/// e.g. "is a symbolic link", "belongs to uid 1001", "has mode 0755".
std::string private_folder_problem(const struct stat& st, uid_t uid);

/// Makes folder `dir` for this job: mode 0700, and only if nobody made it first. Throws
/// UsageError "DIR already exists and was not made by this job: refusing to use it" when it
/// exists (a stranger's, or a symbolic link), Error naming the reason when it cannot be made.
void make_private_folder(const std::string& dir);

/// Makes folder `dir` when it is missing and checks it is this user's private folder (a folder
/// someone else may have made first, such as Open MPI's daemon on a host of a job over several
/// hosts). Throws Error "DIR on HOST REASON: refusing to use it" (private_folder_problem's
/// reason) when it is not; `host` names this host in that line.
void join_private_folder(const std::string& dir, const std::string& host);

/// Creates file `path` for this job: mode 0600, O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC (never an
/// existing file or a symbolic link). Returns its descriptor, open for writing; -1 with errno set
/// when it cannot.
int create_private_file(const std::string& path);

/// Whether `dir` holds an entry whose name starts with `prefix` (false when `dir` is missing).
bool has_entry_with_prefix(const std::string& dir, const std::string& prefix);

}  // namespace nano
