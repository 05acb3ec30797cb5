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

}  // namespace nano
