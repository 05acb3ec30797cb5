#include "runtime/mpi_communicator.h"

// The C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include <algorithm>
#include <atomic>
#include <new>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "env-init/error.h"

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

// Completion shared between the communication thread and a Work handle.
struct Completion {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void finish(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    error = e;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
  }
};

class MpiWork : public Work {
 public:
  explicit MpiWork(std::shared_ptr<Completion> c) : completion_(std::move(c)) {}
  ~MpiWork() override {
    try {
      if (!waited_) completion_->wait();
    } catch (...) {
    }
  }
  void wait() override {
    waited_ = true;
    completion_->wait();
  }

 private:
  std::shared_ptr<Completion> completion_;
  bool waited_ = false;
};

}  // namespace

// Owns MPI for the whole process: MPI_Init_thread and MPI_Finalize happen on its thread,
// which runs every MPI call in submission order.
class MpiEngine {
 public:
  static std::shared_ptr<MpiEngine> instance() {
    // Kept alive until static destruction so MPI_Finalize runs at exit (mpirun requires it)
    // and MPI is never initialised twice.
    static std::shared_ptr<MpiEngine> engine(new MpiEngine());
    return engine;
  }

  ~MpiEngine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

  std::shared_ptr<Completion> submit(std::function<void()> task) {
    auto completion = std::make_shared<Completion>();
    std::lock_guard<std::mutex> lock(mutex_);
    if (init_error_) std::rethrow_exception(init_error_);
    queue_.emplace_back([task = std::move(task), completion] {
      try {
        task();
        completion->finish(nullptr);
      } catch (...) {
        completion->finish(std::current_exception());
      }
    });
    cv_.notify_all();
    return completion;
  }

  void run(std::function<void()> task) { submit(std::move(task))->wait(); }

  MPI_Datatype bf16_type() const { return bf16_type_; }
  MPI_Op bf16_sum_op() const { return bf16_sum_op_; }

 private:
  MpiEngine() {
    auto ready = std::make_shared<Completion>();
    thread_ = std::thread([this, ready] { loop(ready); });
    try {
      ready->wait();
    } catch (...) {
      init_error_ = std::current_exception();
    }
  }

  void loop(std::shared_ptr<Completion> ready) {
    try {
      int initialized = 0;
      MPI_Initialized(&initialized);
      if (!initialized) {
        // Open MPI's default all-reduce choice for large messages on one host measured 10x
        // slower than its ring here; prefer the ring unless the user chose otherwise.
        setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
        setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 0);
        int provided = 0;
        check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                  "MPI_Init_thread");
        owns_mpi_ = true;
      }
      check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &bf16_type_), "MPI_Type_contiguous");
      check_mpi(MPI_Type_commit(&bf16_type_), "MPI_Type_commit");
      check_mpi(MPI_Op_create(&bf16_sum, 1, &bf16_sum_op_), "MPI_Op_create");
      ready->finish(nullptr);
    } catch (...) {
      ready->finish(std::current_exception());
      return;
    }
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) break;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
    MPI_Op_free(&bf16_sum_op_);
    MPI_Type_free(&bf16_type_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  bool owns_mpi_ = false;
  std::exception_ptr init_error_;
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_sum_op_ = MPI_OP_NULL;
};

namespace {
MPI_Comm as_comm(void* p) { return reinterpret_cast<MPI_Comm>(p); }
constexpr int64_t kMaxCount = 1 << 30;  // MPI counts are int
constexpr int64_t kShmMinBytes = 16 << 10;  // below this, MPI_Allreduce's latency wins

template <class T>
void reduce_slice(T* out, T* mirror, const T* const* srcs, int n, int64_t count, double scale) {
  const T s = static_cast<T>(scale);
  if (n == 2) {  // the common case, in a form the compiler vectorises
    const T* __restrict a = srcs[0];
    const T* __restrict b = srcs[1];
    T* __restrict o = out;
    T* __restrict m = mirror;
    for (int64_t i = 0; i < count; ++i) {
      const T v = (a[i] + b[i]) * s;
      o[i] = v;
      m[i] = v;
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    T acc = srcs[0][i];
    for (int q = 1; q < n; ++q) acc += srcs[q][i];
    acc *= s;
    out[i] = acc;
    mirror[i] = acc;
  }
}

void reduce_slice_bf16(c10::BFloat16* out, c10::BFloat16* mirror, const c10::BFloat16* const* srcs,
                       int n, int64_t count, float scale) {
  for (int64_t i = 0; i < count; ++i) {
    float acc = float(srcs[0][i]);
    for (int q = 1; q < n; ++q) acc += float(srcs[q][i]);
    out[i] = mirror[i] = c10::BFloat16(acc * scale);
  }
}
}  // namespace

// One shared-memory window per communicator: `segment` bytes per rank, all mapped by all.
struct ShmArena {
  MPI_Win win = MPI_WIN_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<char*> header;  // each rank's segment
  std::vector<char*> base;    // each rank's data area (after the header)
  int64_t segment = 0;
  int rank = 0, size = 1;

  // Each segment starts with a cache line holding its rank's fence counter.
  static constexpr int64_t kHeader = 64;
  uint32_t epoch = 0;

  std::atomic<uint32_t>* counter(int q) { return reinterpret_cast<std::atomic<uint32_t>*>(header[q]); }

  static bool reached(uint32_t value, uint32_t target) {
    return static_cast<int32_t>(value - target) >= 0;  // wrap-safe
  }

  // A barrier on shared counters that sleeps in the kernel (futex) while a peer is late:
  // MPI_Barrier busy-polls, and yield loops lose whole time slices on a loaded machine; both
  // starve backward() on a rank bound to one core while a DDP bucket waits.
  void fence() {
    ++epoch;
    counter(rank)->store(epoch, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(header[rank]), FUTEX_WAKE, INT32_MAX,
            nullptr, nullptr, 0);
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      for (int spins = 0;; ++spins) {
        const uint32_t value = counter(q)->load(std::memory_order_acquire);
        if (reached(value, epoch)) break;
        if (spins < 512) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
          continue;
        }
        // Sleeps until the peer's counter changes (or 10 ms, as a safety net).
        timespec limit{0, 10 * 1000 * 1000};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(header[q]), FUTEX_WAIT, value, &limit,
                nullptr, 0);
      }
    }
  }

  // In-place all-reduce of `count` elements of `elem` bytes at `data`, on the comm thread.
  void all_reduce(char* data, int64_t count, int64_t elem, at::ScalarType type, double scale) {
    const int64_t per_chunk = segment / elem;
    std::vector<const char*> srcs(size);
    for (int64_t done = 0; done < count; done += per_chunk) {
      const int64_t chunk = std::min(per_chunk, count - done);
      char* mine = data + done * elem;
      auto lo = [&](int q) { return chunk * q / size; };
      // Publish the slices the other ranks reduce (my own slice is read from my buffer).
      for (int q = 0; q < size; ++q) {
        if (q != rank) std::memcpy(base[rank] + lo(q) * elem, mine + lo(q) * elem, (lo(q + 1) - lo(q)) * elem);
      }
      fence();
      const int64_t a = lo(rank), n = lo(rank + 1) - a;
      for (int q = 0; q < size; ++q) srcs[q] = (q == rank ? mine : base[q]) + a * elem;
      char* out = mine + a * elem;
      char* mirror = base[rank] + a * elem;
      switch (type) {
        case at::kFloat:
          reduce_slice(reinterpret_cast<float*>(out), reinterpret_cast<float*>(mirror),
                       reinterpret_cast<const float* const*>(srcs.data()), size, n, scale);
          break;
        case at::kDouble:
          reduce_slice(reinterpret_cast<double*>(out), reinterpret_cast<double*>(mirror),
                       reinterpret_cast<const double* const*>(srcs.data()), size, n, scale);
          break;
        default:
          reduce_slice_bf16(reinterpret_cast<c10::BFloat16*>(out),
                            reinterpret_cast<c10::BFloat16*>(mirror),
                            reinterpret_cast<const c10::BFloat16* const*>(srcs.data()), size, n,
                            static_cast<float>(scale));
      }
      fence();
      for (int q = 0; q < size; ++q) {
        if (q != rank) std::memcpy(mine + lo(q) * elem, base[q] + lo(q) * elem, (lo(q + 1) - lo(q)) * elem);
      }
      fence();  // peers finished reading my segment before the next chunk overwrites it
    }
  }
};

MpiCommunicator::MpiCommunicator(const Context& context, std::size_t shm_segment_bytes)
    : engine_(MpiEngine::instance()) {
  MPI_Comm comm = MPI_COMM_NULL;
  engine_->run([&] {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    if (size_ == 1 || shm_segment_bytes == 0) return;
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    int all_local = node_size == size_, everywhere = 0;
    // Every rank must take the same path.
    check_mpi(MPI_Allreduce(&all_local, &everywhere, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
    if (!everywhere) {
      MPI_Comm_free(&node);
      return;
    }
    auto arena = std::make_shared<ShmArena>();
    arena->comm = node;
    MPI_Comm_rank(node, &arena->rank);
    arena->size = node_size;
    arena->segment = static_cast<int64_t>(shm_segment_bytes);
    char* mine = nullptr;
    check_mpi(MPI_Win_allocate_shared(arena->segment + ShmArena::kHeader, 1, MPI_INFO_NULL, node,
                                      &mine, &arena->win),
              "MPI_Win_allocate_shared");
    new (mine) std::atomic<uint32_t>(0);
    for (int q = 0; q < node_size; ++q) {
      MPI_Aint bytes = 0;
      int disp = 0;
      char* ptr = nullptr;
      check_mpi(MPI_Win_shared_query(arena->win, q, &bytes, &disp, &ptr), "MPI_Win_shared_query");
      arena->header.push_back(ptr);
      arena->base.push_back(ptr + ShmArena::kHeader);
    }
    check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, arena->win), "MPI_Win_lock_all");
    MPI_Win_sync(arena->win);
    check_mpi(MPI_Barrier(node), "MPI_Barrier");  // every counter is initialised
    shm_ = std::move(arena);
  });
  comm_ = reinterpret_cast<void*>(comm);
  if (rank_ != context.rank || size_ != context.world_size) {
    throw Error("nano: MPI world (rank " + std::to_string(rank_) + " of " +
                std::to_string(size_) + ") disagrees with the environment (rank " +
                std::to_string(context.rank) + " of " + std::to_string(context.world_size) + ")");
  }
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Comm comm = as_comm(comm_);
  try {
    engine_->run([&] {
      if (shm_) {
        MPI_Win_unlock_all(shm_->win);
        MPI_Win_free(&shm_->win);
        MPI_Comm_free(&shm_->comm);
      }
      MPI_Comm_free(&comm);
    });
  } catch (...) {
  }
}

void MpiCommunicator::broadcast(at::Tensor& tensor, int root) {
  if (!tensor.is_contiguous() || !tensor.device().is_cpu()) {
    throw Error("nano: broadcast: expected a contiguous CPU tensor");
  }
  if (root < 0 || root >= size_) {
    throw Error("nano: broadcast: bad root " + std::to_string(root) + " in a world of " +
                std::to_string(size_));
  }
  char* data = static_cast<char*>(tensor.data_ptr());
  int64_t bytes = tensor.nbytes();
  MPI_Comm comm = as_comm(comm_);
  engine_->run([&] {
    for (int64_t off = 0; off < bytes; off += kMaxCount) {
      int count = static_cast<int>(std::min(kMaxCount, bytes - off));
      check_mpi(MPI_Bcast(data + off, count, MPI_BYTE, root, comm), "MPI_Bcast");
    }
  });
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  check_reducible(tensor, "all_reduce");
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op mpi_op = MPI_SUM;
  size_t elem = 4;
  switch (tensor.scalar_type()) {
    case at::kDouble: type = MPI_DOUBLE; elem = 8; break;
    case at::kBFloat16: type = engine_->bf16_type(); mpi_op = engine_->bf16_sum_op(); elem = 2; break;
    default: break;
  }
  MPI_Comm comm = as_comm(comm_);
  const int size = size_;
  std::shared_ptr<ShmArena> shm = shm_;
  // The task holds its own reference so the storage outlives the collective.
  return std::make_unique<MpiWork>(engine_->submit([=]() mutable {
    char* data = static_cast<char*>(tensor.data_ptr());
    int64_t n = tensor.numel();
    if (shm && n * static_cast<int64_t>(elem) >= kShmMinBytes) {
      const double scale = op == ReduceOp::kAverage ? 1.0 / size : 1.0;
      shm->all_reduce(data, n, static_cast<int64_t>(elem), tensor.scalar_type(), scale);
      return;
    }
    for (int64_t off = 0; off < n; off += kMaxCount) {
      int count = static_cast<int>(std::min(kMaxCount, n - off));
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + off * elem, count, type, mpi_op, comm),
                "MPI_Allreduce");
    }
    if (op == ReduceOp::kAverage && size > 1) tensor.div_(size);
  }));
}

void MpiCommunicator::barrier() {
  MPI_Comm comm = as_comm(comm_);
  engine_->run([&] { check_mpi(MPI_Barrier(comm), "MPI_Barrier"); });
}

std::vector<double> MpiCommunicator::gather(const std::vector<double>& values) {
  std::vector<double> in = values;
  std::vector<double> out(rank_ == 0 ? values.size() * size_ : 0);
  MPI_Comm comm = as_comm(comm_);
  engine_->run([&] {
    check_mpi(MPI_Gather(in.data(), static_cast<int>(in.size()), MPI_DOUBLE, out.data(),
                         static_cast<int>(in.size()), MPI_DOUBLE, 0, comm),
              "MPI_Gather");
  });
  return out;
}

}  // namespace nano
