#pragma once
// The names of what one attempt of a job leaves on a host, spelled once: nano's shared memory
// and every rank's folder are "/dev/shm/nano-<job>-...", Open MPI's files of a one-host job
// "/dev/shm/nano-<job>/". The launcher (and its guardian) remove them by these names.
#include <string>

namespace nano {

/// A name for one attempt's files, unique on this host: "<pid>-<6 random hex digits>".
std::string make_job_id();

/// Pure: "nano-<job_id>-", the prefix of the job's entries in /dev/shm.
std::string job_shm_prefix(const std::string& job_id);

/// Pure: "/dev/shm/nano-<job_id>", the folder of Open MPI's files of a one-host job.
std::string job_dir_of(const std::string& job_id);

/// Pure: "/tmp/nano-<job_id>", where Open MPI puts its session directories on every host of a
/// job over several hosts (/dev/shm may be small there, and is private to each host anyway).
std::string hosts_session_dir_of(const std::string& job_id);

/// Pure: the marker a rank shim keeps in `session_dir` while its rank runs; the last shim of a
/// host to end removes `session_dir` when no other marker is left.
std::string shim_marker_of(const std::string& session_dir, int rank);

/// Whether `dir` holds an entry whose name starts with `prefix` (false when `dir` is missing).
bool has_entry_with_prefix(const std::string& dir, const std::string& prefix);

}  // namespace nano
