#include "runtime/collectives/shm_collectives.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <sstream>
#include <type_traits>
#include <utility>

#include <nano/error.h>

namespace nano {

namespace {

// Header layout: the fence counter, who owns the area (for noticing a dead peer), and the
// owner's last two calls. Two slots, by the call number's parity: a peer can be at most one
// collective ahead of a rank still comparing (it cannot pass that next collective's fences
// alone), so the slot a rank reads is never the one its peer is writing.
struct Header {
  std::atomic<uint32_t> counter;
  int32_t pid;
  uint64_t pid_namespace;      // inode of /proc/self/ns/pid; 0 when unknown
  std::atomic<uint32_t> left;  // 1: the owner's communicator is gone; it joins no more collectives
  CollectiveSignature calls[2];
};
static_assert(sizeof(Header) <= ShmCollectives::kHeaderBytes, "header outgrew its two cache lines");

Header* header(char* area) { return reinterpret_cast<Header*>(area); }

uint64_t pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;  // wrap-safe
}

// One slice of an all-reduce: out[i] = mirror[i] = op over the ranks' srcs[q][i], in rank
// order, accumulated in Acc (float for the 16-bit floats) and rounded to T once.
template <class T, class Acc, class Op>
void reduce_slice(T* out, T* mirror, const T* const* srcs, int n, int64_t count, Op op, int average_over) {
  const bool divide = average_over > 1;
  auto finish = [average_over, scale = static_cast<Acc>(1.0 / average_over)](Acc acc) {
    if constexpr (std::is_floating_point_v<Acc>) {
      return static_cast<Acc>(acc * scale);
    } else {
      return static_cast<Acc>(acc / average_over);
    }
  };
  if (n == 2) {  // the common case, in a form the compiler vectorises
    const T* __restrict a = srcs[0];
    const T* __restrict b = srcs[1];
    T* __restrict o = out;
    T* __restrict m = mirror;
    for (int64_t i = 0; i < count; ++i) {
      Acc v = op(static_cast<Acc>(a[i]), static_cast<Acc>(b[i]));
      if (divide) v = finish(v);
      o[i] = m[i] = static_cast<T>(v);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    Acc acc = static_cast<Acc>(srcs[0][i]);
    for (int q = 1; q < n; ++q) acc = op(acc, static_cast<Acc>(srcs[q][i]));
    if (divide) acc = finish(acc);
    out[i] = mirror[i] = static_cast<T>(acc);
  }
}

template <class T, class Acc, class Op>
void reduce_as(char* out, char* mirror, const char* const* srcs, int n, int64_t count, Op op, int average_over) {
  reduce_slice<T, Acc>(reinterpret_cast<T*>(out), reinterpret_cast<T*>(mirror), reinterpret_cast<const T* const*>(srcs),
                       n, count, op, average_over);
}

template <class Op>
void reduce_typed(at::ScalarType type, char* out, char* mirror, const char* const* srcs, int n, int64_t count, Op op,
                  int average_over) {
  switch (type) {
    case at::kFloat: return reduce_as<float, float>(out, mirror, srcs, n, count, op, average_over);
    case at::kDouble: return reduce_as<double, double>(out, mirror, srcs, n, count, op, average_over);
    case at::kBFloat16: return reduce_as<c10::BFloat16, float>(out, mirror, srcs, n, count, op, average_over);
    case at::kHalf: return reduce_as<c10::Half, float>(out, mirror, srcs, n, count, op, average_over);
    case at::kChar: return reduce_as<int8_t, int8_t>(out, mirror, srcs, n, count, op, average_over);
    case at::kByte: return reduce_as<uint8_t, uint8_t>(out, mirror, srcs, n, count, op, average_over);
    case at::kShort: return reduce_as<int16_t, int16_t>(out, mirror, srcs, n, count, op, average_over);
    case at::kInt: return reduce_as<int32_t, int32_t>(out, mirror, srcs, n, count, op, average_over);
    case at::kLong: return reduce_as<int64_t, int64_t>(out, mirror, srcs, n, count, op, average_over);
    default: throw Error(std::string("nano: shared-memory all-reduce: unsupported dtype ") + c10::toString(type));
  }
}

void reduce_with(ShmReduceOp op, at::ScalarType type, char* out, char* mirror, const char* const* srcs, int n,
                 int64_t count, int average_over) {
  switch (op) {
    case ShmReduceOp::kSum:
      return reduce_typed(
          type, out, mirror, srcs, n, count, [](auto a, auto b) { return a + b; }, average_over);
    case ShmReduceOp::kProduct:
      return reduce_typed(
          type, out, mirror, srcs, n, count, [](auto a, auto b) { return a * b; }, average_over);
    case ShmReduceOp::kMin:
      return reduce_typed(
          type, out, mirror, srcs, n, count, [](auto a, auto b) { return b < a ? b : a; }, 1);
    case ShmReduceOp::kMax:
      return reduce_typed(
          type, out, mirror, srcs, n, count, [](auto a, auto b) { return a < b ? b : a; }, 1);
    case ShmReduceOp::kBitAnd:
    case ShmReduceOp::kBitOr:
    case ShmReduceOp::kBitXor: break;  // the peer library's alone (collective_signature.h)
  }
  throw Error("nano: shared-memory all-reduce: no bitwise reductions");
}

std::string system_reason() { return std::strerror(errno); }

// Rank q's piece of one round of all_reduce_across, whose earlier rounds moved `done` elements of
// each slice, `piece` at a time: where it starts in the tensor, and its length (0 once q's slice
// is done).
std::pair<int64_t, int64_t> round_piece(int64_t count, int n, int q, int64_t done, int64_t piece) {
  const auto [first, length] = ShmCollectives::own_slice(count, n, q);
  return {first + std::min(done, length), std::clamp<int64_t>(length - done, 0, piece)};
}

}  // namespace

void ShmCollectives::init_header(char* area) {
  Header* h = new (area) Header{};
  h->counter.store(0, std::memory_order_relaxed);
  h->pid = static_cast<int32_t>(getpid());
  h->pid_namespace = pid_namespace();
  h->left.store(0, std::memory_order_relaxed);
  h->calls[0] = h->calls[1] = CollectiveSignature{};
  std::atomic_thread_fence(std::memory_order_release);
}

ShmCollectives::ShmCollectives(std::vector<char*> areas, int64_t data_bytes, int rank,
                               std::chrono::milliseconds timeout)
    : areas_(std::move(areas)), data_bytes_(data_bytes), rank_(rank), timeout_(timeout) {
  if (rank_ < 0 || rank_ >= size() || data_bytes_ < 64) {
    throw Error("nano: shared-memory all-reduce: bad layout (rank " + std::to_string(rank_) + " of " +
                std::to_string(size()) + ", " + std::to_string(data_bytes_) + " bytes per rank)");
  }
}

void ShmCollectives::await_peer(int q) {
  Header* peer = header(areas_[q]);
  std::chrono::steady_clock::time_point deadline{}, left_since{};
  for (int spins = 0, sleeps = 0;; ++spins) {
    const uint32_t value = peer->counter.load(std::memory_order_acquire);
    if (reached(value, epoch_)) return;
    if (spins < 512) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    // Sleeps until the peer's counter changes (or 10 ms, as a safety net).
    timespec limit{0, 10 * 1000 * 1000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&peer->counter), FUTEX_WAIT, value, &limit, nullptr, 0);
    // A peer whose communicator is gone (its program ended or left its training loop) will
    // not come. Its exit is awaited a little first, so the launcher hears of the leaver's end
    // (the root cause) before this rank fails because of it.
    const bool left = peer->left.load(std::memory_order_acquire) != 0;
    if (left && left_since == std::chrono::steady_clock::time_point{}) left_since = std::chrono::steady_clock::now();
    if (!left && ++sleeps % 10 != 0) continue;
    // Every ~0.1 s of waiting (every sleep once it left): a peer that died mid-collective
    // would otherwise be awaited forever when no launcher tears this rank down. Its pid means
    // something only in our pid namespace. (A zombie still answers kill(); its launcher reaps
    // it at once.)
    if (peer->pid_namespace != 0 && peer->pid_namespace == pid_namespace() && kill(peer->pid, 0) != 0 &&
        errno == ESRCH) {
      throw Error("nano: rank " + std::to_string(q) + " (pid " + std::to_string(peer->pid) + ") exited " +
                  waiting_for(q));
    }
    if (left && std::chrono::steady_clock::now() - left_since > std::chrono::seconds(3)) {
      throw Error("nano: rank " + std::to_string(q) + " (pid " + std::to_string(peer->pid) +
                  ") left the world (its communicator was destroyed) " + waiting_for(q));
    }
    // A peer that is alive but does not arrive (stopped, stuck): bounded by the timeout.
    // Checked only after the first sleeps, so the clock is not read on the fast path.
    if (timeout_.count() <= 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (deadline == std::chrono::steady_clock::time_point{}) {
      deadline = now + timeout_ - std::chrono::milliseconds(100);
    } else if (now >= deadline) {
      std::ostringstream seconds;
      seconds << timeout_.count() / 1000.0;
      throw Error("nano: rank " + std::to_string(q) + " (pid " + std::to_string(peer->pid) +
                  ") did not reach the collective within " + seconds.str() + " s (stopped or stuck; " + bound_name_ +
                  " sets this bound): this rank waited in " + describe(current_) + " #" + std::to_string(seq_));
    }
  }
}

std::string ShmCollectives::waiting_for(int q) const {
  // The peer's last call: this one (it went during it), or an earlier one (it left early).
  const Header* peer = header(areas_[q]);
  const uint64_t last = std::max(peer->calls[0].seq, peer->calls[1].seq);
  const std::string here = describe(current_) + " #" + std::to_string(seq_);
  if (last >= seq_) return "during the collective (" + here + ")";
  return (last == 0 ? std::string("before its first collective") : "after its collective #" + std::to_string(last)) +
         " while this rank waited in " + here;
}

void ShmCollectives::open_call(CollectiveSignature call) {
  if (!broken_.empty()) throw Error(broken_ + " (the group is broken since)");
  call.seq = ++seq_;
  current_ = call;
  // Published by the first fence's release store of the counter, read by peers after it.
  header(areas_[rank_])->calls[seq_ & 1] = call;
}

void ShmCollectives::agree() {
  std::vector<CollectiveSignature> calls(areas_.size());
  for (int q = 0; q < size(); ++q) calls[q] = q == rank_ ? current_ : header(areas_[q])->calls[seq_ & 1];
  const int q = first_mismatch(calls);
  if (q > 0) throw Error(mismatch_message(calls, q));
}

template <class Body>
void ShmCollectives::run_call(const CollectiveSignature& call, Body body) {
  open_call(call);
  try {
    body();
  } catch (const std::exception& e) {
    broken_ = e.what();
    throw;
  }
}

void ShmCollectives::leave() {
  Header* mine = header(areas_[rank_]);
  mine->left.store(1, std::memory_order_release);
  // Wake peers asleep on our counter so they see it now, not at their next 10 ms tick.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&mine->counter), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// A barrier on the shared counters: MPI_Barrier busy-polls, and yield loops lose whole time
// slices on a loaded machine; both starve backward() on a rank bound to one core while a DDP
// bucket waits.
void ShmCollectives::fence() {
  ++epoch_;
  Header* mine = header(areas_[rank_]);
  mine->counter.store(epoch_, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&mine->counter), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  for (int q = 0; q < size(); ++q) {
    if (q != rank_) await_peer(q);
  }
}

bool ShmCollectives::reducible(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
    case at::kDouble:
    case at::kBFloat16:
    case at::kHalf:
    case at::kChar:
    case at::kByte:
    case at::kShort:
    case at::kInt:
    case at::kLong: return true;
    default: return false;
  }
}

CollectiveSignature ShmCollectives::all_reduce_call(const at::Tensor& tensor, ShmReduceOp op, int average_over) {
  if (!reducible(tensor.scalar_type())) {
    throw Error(std::string("nano: shared-memory all-reduce: unsupported dtype ") +
                c10::toString(tensor.scalar_type()));
  }
  CollectiveSignature call = signature_of(CollectiveKind::kAllReduce, tensor);
  call.op = op;
  call.average = static_cast<int16_t>(average_over);
  return call;
}

void ShmCollectives::all_reduce(at::Tensor& tensor, ShmReduceOp op, int average_over) {
  run_call(all_reduce_call(tensor, op, average_over), [&] { all_reduce_chunks(tensor, op, average_over); });
}

void ShmCollectives::all_reduce_chunks(at::Tensor& tensor, ShmReduceOp op, int average_over) {
  const at::ScalarType type = tensor.scalar_type();
  const int64_t elem = static_cast<int64_t>(tensor.element_size());
  const int64_t count = tensor.numel();
  char* data = static_cast<char*>(tensor.data_ptr());
  const int n = size();
  const int64_t per_chunk = data_bytes_ / elem;
  std::vector<const char*> srcs(n);
  if (count == 0) {  // nothing to reduce, but the ranks still agree on it
    fence();
    agree();
    return;
  }
  for (int64_t done = 0; done < count; done += per_chunk) {
    const int64_t chunk = std::min(per_chunk, count - done);
    char* mine = data + done * elem;
    char* shared = areas_[rank_] + kHeaderBytes;
    auto lo = [&](int q) { return chunk * q / n; };
    // Publish the slices the other ranks reduce (my own slice is read from my buffer).
    for (int q = 0; q < n; ++q) {
      if (q != rank_) std::memcpy(shared + lo(q) * elem, mine + lo(q) * elem, (lo(q + 1) - lo(q)) * elem);
    }
    fence();
    if (done == 0) agree();  // before reading any peer's data
    const int64_t a = lo(rank_), len = lo(rank_ + 1) - a;
    for (int q = 0; q < n; ++q) srcs[q] = (q == rank_ ? mine : areas_[q] + kHeaderBytes) + a * elem;
    reduce_with(op, type, mine + a * elem, shared + a * elem, srcs.data(), n, len, average_over);
    fence();
    for (int q = 0; q < n; ++q) {
      if (q != rank_) {
        std::memcpy(mine + lo(q) * elem, areas_[q] + kHeaderBytes + lo(q) * elem, (lo(q + 1) - lo(q)) * elem);
      }
    }
    fence();  // peers finished reading my area before the next chunk overwrites it
  }
}

std::pair<int64_t, int64_t> ShmCollectives::own_slice(int64_t count, int n, int rank) {
  const int64_t first = count * rank / n;
  return {first, count * (rank + 1) / n - first};
}

int64_t ShmCollectives::across_block(int64_t count, int64_t element_bytes) {
  const int64_t bytes = std::clamp(count * element_bytes / 4, kMinAcrossBlockBytes, kAcrossBlockBytes);
  return std::max<int64_t>(1, bytes / element_bytes);
}

void ShmCollectives::all_reduce_across(at::Tensor& tensor, ShmReduceOp op, int average_over,
                                       const StartAcross& across) {
  const at::ScalarType type = tensor.scalar_type();
  run_call(all_reduce_call(tensor, op, average_over), [&] {
    struct InFlight {
      at::Tensor block, slice;
      std::function<void()> wait;
    };
    // Waits for a block's exchange, averages its slice, gathers the block.
    auto finish = [&](InFlight& done) {
      if (done.wait) std::exchange(done.wait, nullptr)();
      if (average_over > 1 && done.slice.numel() > 0) {
        // As reduce_slice averages: floats scaled by the inverse, integers divided, truncating.
        if (at::isFloatingType(type)) {
          done.slice.mul_(1.0 / average_over);
        } else {
          done.slice.div_(average_over, "trunc");
        }
      }
      all_gather_rounds(done.block);
    };
    at::Tensor flat = tensor.view({-1});
    const int64_t count = flat.numel();
    const int64_t block = across_block(count, static_cast<int64_t>(tensor.element_size()));
    InFlight pending, next;
    try {
      for (int64_t at = 0; at == 0 || at < count; at += block) {
        next = InFlight{flat.narrow(0, at, std::min(block, count - at)), {}, {}};
        reduce_scatter_rounds(next.block, op, at == 0);
        const auto [first, length] = own_slice(next.block.numel(), size(), rank_);
        next.slice = next.block.narrow(0, first, length);
        if (length > 0) next.wait = across(next.slice);
        if (at > 0) finish(pending);
        pending = std::exchange(next, InFlight{});
      }
      finish(pending);
    } catch (...) {
      // An exchange still under way writes into the caller's tensor: it ends (bounded by its
      // group's timeout) before the error reaches the caller.
      for (InFlight* open : {&pending, &next}) {
        try {
          if (open->wait) std::exchange(open->wait, nullptr)();
        } catch (...) {
          // Its own failure adds nothing to the error already on its way.
        }
      }
      throw;
    }
  });
}

// Rounds of one block's reduce-scatter (`first`: the collective's first, whose first fence
// compares the calls): in round c, each rank's area holds, at q's place, the c-th piece
// of rank q's own slice, and rank q reduces those pieces into its tensor. The slices stay whole
// and contiguous, so the exchange between hosts is one call per block, not one per round.
void ShmCollectives::reduce_scatter_rounds(at::Tensor& tensor, ShmReduceOp op, bool first) {
  const at::ScalarType type = tensor.scalar_type();
  const int64_t elem = static_cast<int64_t>(tensor.element_size());
  const int64_t count = tensor.numel();
  const int n = size();
  const int64_t piece = std::max<int64_t>(1, data_bytes_ / elem / n);
  const int64_t longest = own_slice(count, n, n - 1).second;  // the last slice is never shorter
  char* data = static_cast<char*>(tensor.data_ptr());
  char* shared = areas_[rank_] + kHeaderBytes;
  std::vector<const char*> srcs(n);
  for (int64_t done = 0; done == 0 || done < longest; done += piece) {
    auto part = [&](int q) { return round_piece(count, n, q, done, piece); };
    for (int q = 0; q < n; ++q) {
      const auto [at, length] = part(q);
      if (q != rank_) std::memcpy(shared + q * piece * elem, data + at * elem, length * elem);
    }
    fence();
    if (first && done == 0) agree();  // before reading any peer's data
    const auto [at, length] = part(rank_);
    for (int q = 0; q < n; ++q)
      srcs[q] = q == rank_ ? data + at * elem : areas_[q] + kHeaderBytes + rank_ * piece * elem;
    // The mirror is this rank's own place in its area, which no peer reads.
    if (length > 0) reduce_with(op, type, data + at * elem, shared + rank_ * piece * elem, srcs.data(), n, length, 1);
    fence();  // peers finished reading my area before the next round overwrites it
  }
}

void ShmCollectives::all_gather_rounds(at::Tensor& tensor) {
  const int64_t elem = static_cast<int64_t>(tensor.element_size());
  const int64_t count = tensor.numel();
  const int n = size();
  const int64_t piece = data_bytes_ / elem;
  const int64_t longest = own_slice(count, n, n - 1).second;
  char* data = static_cast<char*>(tensor.data_ptr());
  for (int64_t done = 0; done < longest; done += piece) {
    auto part = [&](int q) { return round_piece(count, n, q, done, piece); };
    const auto [mine, mine_length] = part(rank_);
    std::memcpy(areas_[rank_] + kHeaderBytes, data + mine * elem, mine_length * elem);
    fence();
    for (int q = 0; q < n; ++q) {
      const auto [at, length] = part(q);
      if (q != rank_) std::memcpy(data + at * elem, areas_[q] + kHeaderBytes, length * elem);
    }
    fence();
  }
}

void ShmCollectives::broadcast(at::Tensor& tensor, int root) {
  run_call(signature_of(CollectiveKind::kBroadcast, tensor, root), [&] {
    if (root < 0 || root >= size()) throw Error("nano: broadcast: bad root " + std::to_string(root));
    char* data = static_cast<char*>(tensor.data_ptr());
    const int64_t bytes = static_cast<int64_t>(tensor.nbytes());
    char* shared = areas_[root] + kHeaderBytes;
    if (bytes == 0) {
      fence();
      agree();
    }
    for (int64_t done = 0; done < bytes; done += data_bytes_) {
      const int64_t chunk = std::min(data_bytes_, bytes - done);
      if (rank_ == root) std::memcpy(shared, data + done, chunk);
      fence();
      if (done == 0) agree();
      if (rank_ != root) std::memcpy(data + done, shared, chunk);
      fence();  // everyone has read the root's area before it takes the next chunk
    }
  });
}

void ShmCollectives::all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  run_call(signature_of(CollectiveKind::kAllGather, input), [&] {
    const char* in = static_cast<const char*>(input.data_ptr());
    const int64_t bytes = static_cast<int64_t>(input.nbytes());
    if (bytes == 0) {
      fence();
      agree();
    }
    for (int64_t done = 0; done < bytes; done += data_bytes_) {
      const int64_t chunk = std::min(data_bytes_, bytes - done);
      std::memcpy(areas_[rank_] + kHeaderBytes, in + done, chunk);
      fence();
      if (done == 0) agree();
      for (int q = 0; q < size(); ++q) {
        char* out = static_cast<char*>(outputs[q].data_ptr()) + done;
        const char* from = q == rank_ ? in + done : areas_[q] + kHeaderBytes;
        if (out != from) std::memmove(out, from, chunk);
      }
      fence();
    }
  });
}

void ShmCollectives::barrier() { agree_on(CollectiveSignature{}); }

void ShmCollectives::agree_on(const CollectiveSignature& call) {
  run_call(call, [&] {
    fence();
    agree();
  });
}

std::unique_ptr<SharedMemory> SharedMemory::create(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST)
    throw SharedMemoryTaken("nano: shared memory " + name + " was made by someone else first: refusing it");
  if (fd < 0) throw Error("nano: cannot create shared memory " + name + ": " + system_reason());
  // posix_fallocate, not just ftruncate: a /dev/shm too small for the object (Docker's default
  // is 64 MB) must fail here, not with SIGBUS at the first write.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      (errno = posix_fallocate(fd, 0, static_cast<off_t>(bytes))) != 0) {
    const std::string reason = system_reason();
    close(fd);
    shm_unlink(name.c_str());
    throw Error("nano: cannot size shared memory " + name + " to " + std::to_string(bytes) + " bytes: " + reason);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string reason = system_reason();
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    throw Error("nano: cannot map shared memory " + name + ": " + reason);
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(name, static_cast<char*>(p), bytes));
}

std::unique_ptr<SharedMemory> SharedMemory::open(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) throw Error("nano: cannot open shared memory " + name + ": " + system_reason());
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < bytes) {
    close(fd);
    throw Error("nano: shared memory " + name + " is smaller than " + std::to_string(bytes) + " bytes");
  }
  if (st.st_uid != getuid() || (st.st_mode & 077) != 0) {  // made by rank 0 (0600): nobody else's
    close(fd);
    throw Error("nano: shared memory " + name + " is not this user's private object: refusing to map it");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string reason = system_reason();
  close(fd);
  if (p == MAP_FAILED) throw Error("nano: cannot map shared memory " + name + ": " + reason);
  auto shm = std::unique_ptr<SharedMemory>(new SharedMemory(name, static_cast<char*>(p), bytes));
  shm->linked_ = false;  // the creator owns the name
  return shm;
}

void SharedMemory::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

SharedMemory::~SharedMemory() {
  unlink();
  munmap(data_, bytes_);
}

}  // namespace nano
