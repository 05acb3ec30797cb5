#pragma once
// What a rank may expect from its launcher, beyond torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*, which
// nano-run sets as torchrun does: launcher/prepare/torchrun_env.h). Every variable nano's launchers write
// for nano's runtime to read is named here once, so the side that writes a name and the side
// that reads it cannot drift apart. Here, in the core both programs and the runtime stand on,
// because both sides include it. (The listen guard's variable lives in launcher/source_filter/source_filter.h: its
// reader is a C library preloaded into mpirun, not a rank.)
namespace nano::contract {

/// The job's id, the same on every rank of every attempt (nano-run's, or an in-program
/// launch's): it names the job's /dev/shm objects and its one-host rendezvous file.
inline constexpr const char* kJobId = "NANO_JOB_ID";
/// How many times the world was started again after a failure so far: "0" on the first attempt.
inline constexpr const char* kRestartCount = "NANO_RESTART_COUNT";
/// The attempt's secret (core/job_secret.h): a rank proves with it that it belongs to the job.
inline constexpr const char* kJobSecret = "NANO_JOB_SECRET";
/// A Python launch's key (python/nano_torch/_handoff.py): its ranks check with it what the
/// caller sealed. A secret like the job's: it travels in environments only, never in arguments.
inline constexpr const char* kPythonKey = "NANO_PYTHON_KEY";
/// The job's private 0700 folder on this host ("/dev/shm/nano-<job id>"), made by the launcher
/// (which refuses one made by someone else first) and removed however the job ends: the one-host
/// rendezvous store lives there. Set only for a job on one host; unset across hosts.
inline constexpr const char* kJobDir = "NANO_JOB_DIR";
/// "1" when the rank runs on the host of the process that launched the job (nano-run, or the
/// program of an in-program launch), "0" elsewhere: decided by the launcher's plan, never by
/// what a rank finds on its host. Every rank of a one-host job, and of a Slurm node's part
/// (each node's nano-run launches its own ranks), has "1".
inline constexpr const char* kLaunchHost = "NANO_LAUNCH_HOST";
/// The rank's CPUs as a cpulist ("0-3,8"): set only by nano-run, so its presence tells a rank
/// which launcher started it.
inline constexpr const char* kCpus = "NANO_CPUS";
/// Under `nano-run --tune`: the folder where each rank writes its step report, and the trial's
/// number, which every report carries.
inline constexpr const char* kTuneReport = "NANO_TUNE_REPORT";
inline constexpr const char* kTuneTrial = "NANO_TUNE_TRIAL";
/// Under `nano-run --timeline` (TorchNanoOptions::timeline): the folder where each rank writes
/// its timeline records (runtime/timeline/recorder.h), which the launcher merges when the job ends.
inline constexpr const char* kTimeline = "NANO_TIMELINE";
/// An elastic launch with rejoin (nano-run --rejoin): "1" asks nano's checkpoints to stop the
/// ranks at the next checkpoint once kStopAtCheckpointSignal comes (a host came back; the world
/// grows at that step), with kStoppedAtCheckpointExitCode after the checkpoint is on disk.
inline constexpr const char* kStopAtCheckpoint = "NANO_STOP_AT_CHECKPOINT";
/// SIGURG (23 on Linux): its default action is to ignore it, so a program without nano's
/// checkpoints goes on as if nothing came.
inline constexpr int kStopAtCheckpointSignal = 23;
/// EX_TEMPFAIL: every rank of a world that stopped at a checkpoint as asked exits with it.
inline constexpr int kStoppedAtCheckpointExitCode = 75;
/// An elastic launch that keeps the global batch (--batch-policy global): the world size of its
/// first attempt, for which the per-rank batch and the learning rate were chosen; unset otherwise.
inline constexpr const char* kBatchWorldSize = "NANO_BATCH_WORLD_SIZE";
/// The job a checkpoint folder is claimed for: an in-program launch hands its caller's to its
/// ranks, so the folder stays the caller's.
inline constexpr const char* kCheckpointJob = "NANO_CHECKPOINT_JOB";
/// An in-program launch's rank (nano::TorchNano, nano::nano): the launch's index ("1", ...), and
/// the file rank 0 writes its result to for the caller.
inline constexpr const char* kInProgram = "NANO_IN_PROGRAM";
inline constexpr const char* kInProgramResult = "NANO_IN_PROGRAM_RESULT";

// What a user may set for the ranks (every launcher passes NANO_* through: launcher/prepare/carried_env.h)
// and nano's C++ reads. Named here for the same reason: one spelling for reader and docs.

/// The runtime's communicator: auto, mpi or gloo (nano::init; TorchNanoOptions::backend "auto").
inline constexpr const char* kBackend = "NANO_BACKEND";
/// Seconds a rank waits for its peers at nano::init before it gives up naming who is missing.
inline constexpr const char* kRendezvousTimeout = "NANO_RENDEZVOUS_TIMEOUT";
/// Seconds one collective may wait for a peer that stopped making progress.
inline constexpr const char* kCollectiveTimeout = "NANO_COLLECTIVE_TIMEOUT";
/// Bytes of each rank's shared-memory area (0 = never shared memory).
inline constexpr const char* kShmBytes = "NANO_SHM_BYTES";
/// The address Gloo listens on where the host name does not route to the other hosts.
inline constexpr const char* kHostAddr = "NANO_HOST_ADDR";
/// Where a launch finds nano-run for the mpi backend's rank shim (read by the launcher).
inline constexpr const char* kRunPath = "NANO_RUN";

}  // namespace nano::contract
