#pragma once
// Who this process is in the training world: read from nano-run's rank contract, plain
// mpirun (OMPI_COMM_WORLD_*), or torchrun-style variables; with none of them, a world of one.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nano/environment.h>

namespace nano {

class Communicator;

/// Which launcher started this process (decided from the environment).
enum class Launcher { kNone, kNanoRun, kMpirun, kTorchrun };

/// Which communicator the ranks talk through; kAuto = MPI under mpirun (OMPI_COMM_WORLD_SIZE
/// set), else Gloo. (How the ranks were started is the launcher's backend: nano-run --backend.)
enum class CommBackend { kAuto, kMpi, kGloo, kSelf };

/// The rank contract of one process. Pure data.
struct Context {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< 0 = not given
  std::string cpus;     ///< NANO_CPUS ("" when not under nano-run)
  int threads = 0;      ///< intra-op threads to use; 0 = leave libtorch's default
  Launcher launcher = Launcher::kNone;
  CommBackend backend = CommBackend::kSelf;  ///< resolved: never kAuto
  std::chrono::milliseconds rendezvous_timeout{300000};
  /// The bound on every wait for peers after the rendezvous: a collective, a barrier, the
  /// communicator's teardown and MPI_Finalize at exit. A peer that is alive but makes no
  /// progress for this long (stopped, deadlocked, cut off) fails the waiting rank with a line
  /// naming the collective. NANO_COLLECTIVE_TIMEOUT (seconds); default 10 minutes.
  std::chrono::milliseconds collective_timeout{600000};
};

/// Options of init(); each overrides the environment (NANO_BACKEND, NANO_RENDEZVOUS_TIMEOUT,
/// NANO_COLLECTIVE_TIMEOUT).
struct InitOptions {
  CommBackend backend = CommBackend::kAuto;
  std::optional<std::chrono::milliseconds> rendezvous_timeout;
  std::optional<std::chrono::milliseconds> collective_timeout;
  bool set_threads = true;  ///< call at::set_num_threads(context.threads) when threads > 0
};

/// Pure decision: environment (+ the size of this process's CPU affinity mask, 0 = unknown)
/// -> Context. Rank variables: RANK/WORLD_SIZE (nano-run, torchrun) take precedence over
/// OMPI_COMM_WORLD_*; both present and different is an error. Threads: OMP_NUM_THREADS, else
/// the affinity mask size, only when launched by something (a world of one launched by nobody
/// keeps libtorch's default). Throws UsageError naming the bad variable and value.
Context context_from_env(const Environment& env, int affinity_cpus = 0, const InitOptions& options = {});

/// A ready training world: the context plus its connected communicator.
struct World {
  Context context;
  std::shared_ptr<Communicator> comm;
  int rank() const { return context.rank; }
  int size() const { return context.world_size; }
  bool is_main() const { return context.rank == 0; }
};

/// Effectful shell: reads the environment and affinity mask, sets libtorch's intra-op thread
/// count, and connects the communicator (rendezvous). Throws nano::Error on failure.
World init(const InitOptions& options = {});

}  // namespace nano
