#include "runtime/communicators/mpi_communicator.h"

// The C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nano/error.h>
#include "core/rank_contract.h"
#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/rendezvous/rendezvous.h"

namespace nano {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("nano: ") + what + " failed: " + std::string(text, len));
}

// MPI has no bfloat16: a user op on a 2-byte type, summing in float.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const c10::BFloat16*>(in);
  auto* b = static_cast<c10::BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = c10::BFloat16(float(a[i]) + float(b[i]));
}

}  // namespace

// How the process is exiting, recorded by an on_exit handler registered right after the
// engine, so it runs before the engine's destructor: a rank that exits with an error must not
// wait in MPI_Finalize for peers that may still sit in a collective with it.
std::atomic<bool> g_exit_seen{false};
std::atomic<int> g_exit_status{0};
void record_exit(int status, void*) {
  g_exit_status = status;
  g_exit_seen = true;
}

// Owns MPI for the whole process: MPI_Init_thread and MPI_Finalize happen on its executor's
// thread, which runs every MPI call in submission order. Every wait on that thread is bounded
// (rendezvous timeout for MPI_Init, collective timeout for the rest); a call that outlives its
// bound abandons the executor (runtime/collectives/serial_executor.h), and MPI is then never finalised.
class MpiEngine {
 public:
  /// The process's engine; the first call initialises MPI, bounded by the context's
  /// rendezvous timeout.
  static std::shared_ptr<MpiEngine> instance(const Context& context) {
    // Kept alive until static destruction so MPI_Finalize runs at exit (mpirun requires it)
    // and MPI is never initialised twice.
    static std::shared_ptr<MpiEngine> engine(new MpiEngine(context));
    static const bool hooked = on_exit(record_exit, nullptr) == 0;
    (void)hooked;
    engine->collective_timeout_ = context.collective_timeout;
    return engine;
  }

  ~MpiEngine() {
    const bool failing = g_exit_seen && g_exit_status != 0;
    if (init_error_ || executor_.abandoned() || failing) {
      // Leave MPI as it is; the launcher (or mpirun) ends the peers. The executor's thread, maybe
      // inside an MPI call, is left to the process's exit.
      executor_.abandon("nano: MPI is shut down");
      return;
    }
    try {
      executor_.run_for([this] { finalize(); }, collective_timeout_, "MPI_Finalize at exit");
    } catch (const std::exception& e) {
      // A peer never reached the end: exit without MPI_Finalize rather than wait forever.
      std::cerr << e.what() << "; exiting without it" << std::endl;
    }
  }

  std::shared_ptr<Completion> submit(std::function<void()> task) {
    if (init_error_) std::rethrow_exception(init_error_);
    return executor_.submit(std::move(task));
  }

  /// Runs `task` on the MPI thread, bounded by the collective timeout.
  void run(std::function<void()> task, const std::string& what) {
    if (init_error_) std::rethrow_exception(init_error_);
    executor_.run_for(std::move(task), collective_timeout_, what);
  }

  SerialExecutor* executor() { return &executor_; }
  std::chrono::milliseconds collective_timeout() const { return collective_timeout_; }

  /// Keeps a destroyed communicator's MPI objects until a normal exit frees them, right
  /// before MPI_Finalize: freeing a window is collective, and a rank that leaves after an
  /// error must not wait for peers that are still inside a collective with it.
  void retire(MPI_Comm comm, std::shared_ptr<ShmArena> shm) {
    std::lock_guard<std::mutex> lock(retired_mutex_);
    retired_comms_.push_back(comm);
    if (shm) retired_shm_.push_back(std::move(shm));
  }

  MPI_Datatype bf16_type() const { return bf16_type_; }
  MPI_Op bf16_sum_op() const { return bf16_sum_op_; }

 private:
  explicit MpiEngine(const Context& context) : collective_timeout_(context.collective_timeout) {
    try {
      auto done = executor_.submit([this] { init(); });
      if (!done->wait_for(context.rendezvous_timeout)) {
        std::ostringstream seconds;
        seconds << context.rendezvous_timeout.count() / 1000.0;
        const std::string message = "nano: MPI rendezvous timed out after " + seconds.str() +
                                    " s: MPI_Init did not complete on every rank (a rank did not start or did "
                                    "not call nano::init; " +
                                    contract::kRendezvousTimeout + " sets this bound)";
        executor_.abandon(message);
        throw Error(message);
      }
    } catch (...) {
      init_error_ = std::current_exception();
    }
  }

  void init() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // Open MPI's default all-reduce choice for large messages on one host measured 10x
      // slower than its ring here; prefer the ring unless the user chose otherwise.
      setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
      setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 0);
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_mpi_ = true;
    }
    check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &bf16_type_), "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&bf16_type_), "MPI_Type_commit");
    check_mpi(MPI_Op_create(&bf16_sum, 1, &bf16_sum_op_), "MPI_Op_create");
  }

  void finalize();

  SerialExecutor executor_;
  bool owns_mpi_ = false;
  std::exception_ptr init_error_;
  std::chrono::milliseconds collective_timeout_;
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum_op_ = MPI_OP_NULL;
  std::mutex retired_mutex_;
  std::vector<MPI_Comm> retired_comms_;
  std::vector<std::shared_ptr<ShmArena>> retired_shm_;
};

// The MPI shared window that holds every local rank's area, and the all-reduce over it. Across
// hosts that each hold the same number of ranks, `across` joins this rank with the ranks of the
// same local index on the other hosts (the hierarchical all-reduce's exchange between hosts).
struct ShmArena {
  MPI_Win win = MPI_WIN_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm across = MPI_COMM_NULL;
  std::unique_ptr<ShmCollectives> reduce;
};

void MpiEngine::finalize() {
  std::lock_guard<std::mutex> lock(retired_mutex_);
  // In creation order on every rank, so the collective frees match up.
  for (auto& shm : retired_shm_) {
    MPI_Win_unlock_all(shm->win);
    MPI_Win_free(&shm->win);
    MPI_Comm_free(&shm->comm);
    if (shm->across != MPI_COMM_NULL) MPI_Comm_free(&shm->across);
  }
  for (auto& comm : retired_comms_) MPI_Comm_free(&comm);
  MPI_Op_free(&bf16_sum_op_);
  MPI_Type_free(&bf16_type_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

namespace {
MPI_Comm as_comm(void* p) { return reinterpret_cast<MPI_Comm>(p); }
constexpr int64_t kMaxCount = 1 << 30;  // MPI counts are int

// Open MPI backs a shared window with a file in its osc_sm backing directory and aborts the
// whole job (MPI_ERRORS_ARE_FATAL) when that file does not fit, as it would in a container's
// 64 MB /dev/shm with many ranks. Checking the free space first lets the ranks fall back to
// MPI_Allreduce instead. Returns why the window would not fit, or "" when it fits or the
// space cannot be known (another MPI, no such directory: MPI itself then decides).
std::string shared_window_shortfall(int64_t data_bytes, int ranks) {
  const char* configured = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  const std::string dir = configured && *configured ? configured : "/dev/shm";
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return "";
  using u64 = unsigned long long;
  const u64 free_bytes = static_cast<u64>(st.f_bavail) * st.f_frsize;
  // Each rank's area, rounded up to pages, plus Open MPI's own control pages. data_bytes is at
  // most 1 PiB (make_communicator), so only the product over the ranks needs a guard.
  const u64 page = static_cast<u64>(std::max(4096L, sysconf(_SC_PAGESIZE)));
  const u64 area = (static_cast<u64>(data_bytes) + ShmCollectives::kHeaderBytes + page - 1) / page * page + 2 * page;
  const u64 n = static_cast<u64>(std::max(ranks, 1));
  const u64 needed = area > std::numeric_limits<u64>::max() / n ? std::numeric_limits<u64>::max() : area * n;
  if (free_bytes >= needed) return "";
  return "nano: cannot place the shared-memory all-reduce in " + dir + ": " + std::to_string(ranks) + " ranks need " +
         std::to_string(needed) + " bytes, " + std::to_string(free_bytes) + " are free";
}
// The shared-memory all-reduce: a shared window of `data_bytes` per rank of this host through
// MPI; across hosts that each hold the same number of ranks (two or more), with the
// communicator of this local index between hosts. Null (said once by rank 0) when the hosts'
// counts differ or the window would not fit. Collective over `comm`: every rank takes the same
// path. Runs on the MPI thread.
std::shared_ptr<ShmArena> connect_shared_memory(MPI_Comm comm, int rank, int size, int64_t data_bytes,
                                                std::chrono::milliseconds timeout) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  const std::string shortfall = shared_window_shortfall(data_bytes, node_size);
  // Every rank must take the same path: hosts of equal counts (one host, or the hierarchy), and
  // room for the window everywhere. The fewest and most ranks on a host (as -most).
  int counts[3] = {node_size, -node_size, shortfall.empty()}, all[3] = {0, 0, 0};
  check_mpi(MPI_Allreduce(counts, all, 3, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  const bool even = all[0] == -all[1] && all[0] >= 2;
  const bool one_host = node_size == size;
  if (!even || !all[2]) {
    if (even && rank == 0) {
      // Say why once: the job still runs, but every all-reduce now goes through MPI's own.
      std::cerr << (shortfall.empty() ? "nano: another rank found too little room for the shared-memory "
                                        "all-reduce"
                                      : shortfall)
                << "; all-reduce goes through MPI_Allreduce instead (" << contract::kShmBytes
                << "=0 chooses that quietly)" << std::endl;
    }
    if (!even && rank == 0) {
      const char* btl = std::getenv("OMPI_MCA_btl");
      std::cerr << "nano: mpi communicator: " << size << " ranks on several hosts"
                << (all[0] != -all[1] ? " (which hold different numbers of ranks)" : "") << "; all-reduce through "
                << "MPI_Allreduce, on Open MPI's transports (shared memory within a host; between hosts "
                << (btl ? std::string("btl=") + btl : std::string("its tcp btl, or the fabric it finds")) << ")"
                << std::endl;
    }
    MPI_Comm_free(&node);
    return nullptr;
  }
  auto arena = std::make_shared<ShmArena>();
  arena->comm = node;
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  if (!one_host) {
    check_mpi(MPI_Comm_split(comm, node_rank, rank, &arena->across), "MPI_Comm_split");
    if (rank == 0) {
      std::cerr << "nano: mpi communicator: " << size / node_size << " hosts x " << node_size
                << " ranks; all-reduce hierarchical: shared memory within each host, MPI_Allreduce between the "
                   "ranks of each local index"
                << std::endl;
    }
  }
  char* mine = nullptr;
  check_mpi(
      MPI_Win_allocate_shared(data_bytes + ShmCollectives::kHeaderBytes, 1, MPI_INFO_NULL, node, &mine, &arena->win),
      "MPI_Win_allocate_shared");
  ShmCollectives::init_header(mine);
  std::vector<char*> areas;
  for (int q = 0; q < node_size; ++q) {
    MPI_Aint bytes = 0;
    int disp = 0;
    char* ptr = nullptr;
    check_mpi(MPI_Win_shared_query(arena->win, q, &bytes, &disp, &ptr), "MPI_Win_shared_query");
    areas.push_back(ptr);
  }
  arena->reduce = std::make_unique<ShmCollectives>(std::move(areas), data_bytes, node_rank, timeout);
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, arena->win), "MPI_Win_lock_all");
  MPI_Win_sync(arena->win);
  check_mpi(MPI_Barrier(node), "MPI_Barrier");  // every header is initialised
  return arena;
}

}  // namespace

MpiCommunicator::MpiCommunicator(const Context& context, std::size_t shm_segment_bytes) {
  // Under a launcher that names a rendezvous address (nano-run, torchrun-style variables), the
  // ranks first meet at rank 0's store: MPI_Init has no timeout of its own and cannot say
  // which rank is missing. Only for the process's first communicator (MPI starts once).
  static std::atomic<bool> first{true};
  c10::intrusive_ptr<c10d::Store> store;
  if (first.exchange(false) && context.world_size > 1 && context.master_port > 0) {
    store = rendezvous(context, "nano/mpi/");
  }
  engine_ = MpiEngine::instance(context);
  MPI_Comm comm = MPI_COMM_NULL;
  const auto timeout = context.collective_timeout;
  engine_->run(
      [&] {
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
        MPI_Comm_rank(comm, &rank_);
        MPI_Comm_size(comm, &size_);
        if (size_ == 1 || shm_segment_bytes == 0) return;
        shm_ = connect_shared_memory(comm, rank_, size_, static_cast<int64_t>(shm_segment_bytes), timeout);
      },
      "the MPI communicator's set-up");
  // Every rank is past MPI_Init (MPI_Comm_dup is collective): the store may go.
  store.reset();
  comm_ = reinterpret_cast<void*>(comm);
  std::shared_ptr<CallCheck> peer_check;
  // Across hosts the shared window carries only the all-reduce's hierarchy: every call's
  // signature, and every other call, goes through MPI over the whole world.
  hierarchical_ = shm_ && shm_->across != MPI_COMM_NULL;
  if ((!shm_ || hierarchical_) && size_ > 1) {
    const int size = size_;
    peer_check = std::make_shared<CallCheck>([comm, size](const CollectiveSignature& mine) {
      std::vector<CollectiveSignature> calls(static_cast<std::size_t>(size));
      CollectiveSignature sent = mine;
      const int n = static_cast<int>(sizeof(CollectiveSignature));
      check_mpi(MPI_Allgather(&sent, n, MPI_BYTE, calls.data(), n, MPI_BYTE, comm), "MPI_Allgather");
      return calls;
    });
  }
  route_ = CollectiveRoute(shm_ && !hierarchical_ ? shm_->reduce.get() : nullptr, std::move(peer_check));
  if (rank_ != context.rank || size_ != context.world_size) {
    throw Error("nano: MPI world (rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                ") disagrees with the environment (rank " + std::to_string(context.rank) + " of " +
                std::to_string(context.world_size) + ")");
  }
}

MpiCommunicator::~MpiCommunicator() {
  // No MPI call and no wait here (see MpiEngine::retire); peers waiting for this rank in the
  // shared window learn at once that it left.
  if (shm_) shm_->reduce->leave();
  engine_->retire(as_comm(comm_), std::move(shm_));
}

void MpiCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_broadcastable(tensor, root, size_);
  char* data = static_cast<char*>(tensor.data_ptr());
  int64_t bytes = tensor.nbytes();
  MPI_Comm comm = as_comm(comm_);
  engine_->run(
      [&] {
        route_.run_on_peer(signature_of(CollectiveKind::kBroadcast, tensor, root), [&] {
          for (int64_t off = 0; off < bytes; off += kMaxCount) {
            int count = static_cast<int>(std::min(kMaxCount, bytes - off));
            check_mpi(MPI_Bcast(data + off, count, MPI_BYTE, root, comm), "MPI_Bcast");
          }
        });
      },
      "broadcast");
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  check_reducible(tensor, "all_reduce");
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op mpi_op = MPI_SUM;
  size_t elem = 4;
  switch (tensor.scalar_type()) {
    case at::kDouble:
      type = MPI_DOUBLE;
      elem = 8;
      break;
    case at::kBFloat16:
      type = engine_->bf16_type();
      mpi_op = engine_->bf16_sum_op();
      elem = 2;
      break;
    default: break;
  }
  MPI_Comm comm = as_comm(comm_);
  const int size = size_;
  CollectiveRoute route = route_;
  CollectiveSignature call = signature_of(CollectiveKind::kAllReduce, tensor);
  if (op == ReduceOp::kAverage && size > 1) call.average = static_cast<int16_t>(size);
  // The task holds its own reference so the storage outlives the collective. The shared-memory
  // path bounds its own waits and names the late rank; the handle's bound, a little longer,
  // catches MPI_Allreduce.
  const auto limit = engine_->collective_timeout() + std::chrono::seconds(1);
  // `window` keeps the shared window (which `route` points into) alive for the task.
  const bool hierarchical = hierarchical_;
  return std::make_unique<CompletionWork>(engine_->submit([=, window = shm_]() mutable {
    char* data = static_cast<char*>(tensor.data_ptr());
    int64_t n = tensor.numel();
    if (hierarchical && n * static_cast<int64_t>(elem) >= ShmCollectives::kMinBytes) {
      route.run_on_peer(call, [&] {
        window->reduce->all_reduce_across(
            tensor, ShmReduceOp::kSum, op == ReduceOp::kAverage ? size : 1, [&](at::Tensor& slice) {
              char* part = static_cast<char*>(slice.data_ptr());
              for (int64_t off = 0; off < slice.numel(); off += kMaxCount) {
                int count = static_cast<int>(std::min(kMaxCount, slice.numel() - off));
                check_mpi(MPI_Allreduce(MPI_IN_PLACE, part + off * elem, count, type, mpi_op, window->across),
                          "MPI_Allreduce");
              }
              return std::function<void()>();  // done: Open MPI's TCP would not progress in the background
            });
      });
      return;
    }
    route.run(
        call, n * static_cast<int64_t>(elem) >= ShmCollectives::kMinBytes,
        [&](ShmCollectives& area) { area.all_reduce(tensor, ShmReduceOp::kSum, op == ReduceOp::kAverage ? size : 1); },
        [&] {
          for (int64_t off = 0; off < n; off += kMaxCount) {
            int count = static_cast<int>(std::min(kMaxCount, n - off));
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + off * elem, count, type, mpi_op, comm), "MPI_Allreduce");
          }
          if (op == ReduceOp::kAverage && size > 1) tensor.div_(size);
        });
  }),
                                          engine_->executor(), limit, "all_reduce");
}

void MpiCommunicator::barrier() {
  MPI_Comm comm = as_comm(comm_);
  engine_->run([&] { route_.run_on_peer(CollectiveSignature{}, [&] { check_mpi(MPI_Barrier(comm), "MPI_Barrier"); }); },
               "barrier");
}

std::vector<double> MpiCommunicator::gather(const std::vector<double>& values) {
  std::vector<double> in = values;
  std::vector<double> out(rank_ == 0 ? values.size() * size_ : 0);
  MPI_Comm comm = as_comm(comm_);
  engine_->run(
      [&] {
        route_.run_on_peer(
            signature(CollectiveKind::kGather, static_cast<int8_t>(at::kDouble), static_cast<int64_t>(in.size()), 0),
            [&] {
              check_mpi(MPI_Gather(in.data(), static_cast<int>(in.size()), MPI_DOUBLE, out.data(),
                                   static_cast<int>(in.size()), MPI_DOUBLE, 0, comm),
                        "MPI_Gather");
            });
      },
      "gather");
  return out;
}

}  // namespace nano
