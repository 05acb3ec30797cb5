#include "python/torch_backend.h"

#include <Python.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <utility>

#include <nano/error.h>
#include "core/job_secret.h"
#include "python/backend_executors.h"
#include "python/backend_rendezvous.h"
#include "python/nano_work.h"
#include "runtime/collectives/gloo_signatures.h"
#include "runtime/collectives/host_layout.h"
#include "runtime/collectives/job_store.h"
#include "runtime/collectives/rendezvous.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/collectives/shm_rendezvous.h"
#include "runtime/step_report.h"
#include "runtime/timeline.h"

namespace nano {

namespace {

using RedOp = c10d::ReduceOp::RedOpType;

// The backend whose future's callbacks this thread is running (null elsewhere).
thread_local const TorchBackend* running_on_thread = nullptr;

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// The shared-memory form of `op`, when it has one.
bool shm_op(RedOp op, ShmReduceOp* out) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG: *out = ShmReduceOp::kSum; return true;
    case c10d::ReduceOp::PRODUCT: *out = ShmReduceOp::kProduct; return true;
    case c10d::ReduceOp::MIN: *out = ShmReduceOp::kMin; return true;
    case c10d::ReduceOp::MAX: *out = ShmReduceOp::kMax; return true;
    default: return false;
  }
}

// An all_to_all's signature: its dtype only (each rank's counts may differ).
CollectiveSignature all_to_all_signature(const at::Tensor& input) {
  CollectiveSignature call = signature_of(CollectiveKind::kAllToAll, input);
  call.count = -1;
  return call;
}

// An all-reduce's signature: its op as torch names it (AVG: a sum over `size` ranks).
CollectiveSignature all_reduce_signature(const at::Tensor& tensor, RedOp op, int size) {
  CollectiveSignature call = signature_of(CollectiveKind::kAllReduce, tensor);
  if (!shm_op(op, &call.op)) {
    call.op = op == c10d::ReduceOp::BAND  ? ShmReduceOp::kBitAnd
              : op == c10d::ReduceOp::BOR ? ShmReduceOp::kBitOr
                                          : ShmReduceOp::kBitXor;
  }
  if (op == c10d::ReduceOp::AVG) call.average = static_cast<int16_t>(size);
  return call;
}

// A contiguous CPU tensor's bytes, as a uint8 tensor over the same memory: how operations that
// only move bytes serve every dtype, Gloo's missing bfloat16 and bool included. It keeps the
// tensor alive: for Gloo's send and recv, which outlive the call.
at::Tensor owned_bytes(const at::Tensor& tensor) {
  return at::from_blob(
      tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())}, [keep = tensor](void*) {},
      at::TensorOptions().dtype(at::kByte));
}

// The same without keeping it alive, for what the backend's thread hands Gloo and waits for:
// Gloo's threads then never hold (and free, perhaps during the interpreter's exit) a tensor a
// Python caller owns.
at::Tensor borrowed_bytes(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())},
                       at::TensorOptions().dtype(at::kByte));
}

at::Tensor borrowed(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options());
}

void check_cpu(const at::Tensor& tensor, const char* what) {
  if (!tensor.device().is_cpu() || tensor.is_sparse()) {
    throw Error(std::string("nano: ") + what + ": the nano backend takes dense CPU tensors, got one on " +
                tensor.device().str() + (tensor.is_sparse() ? " (sparse)" : ""));
  }
}

void check_one(const std::vector<at::Tensor>& tensors, const char* what) {
  if (tensors.size() != 1) {
    throw Error(std::string("nano: ") + what + " takes one tensor per rank, got " + std::to_string(tensors.size()));
  }
  check_cpu(tensors[0], what);
}

// The checks torch's own backends make before communicating, so a wrong argument is one rank's
// error (the group goes on) and not a failure of the group.
void check_op(RedOp op, at::ScalarType type, const char* what) {
  if (!ShmCollectives::reducible(type)) {
    throw Error(std::string("nano: ") + what + ": cannot reduce " + c10::toString(type) + " tensors");
  }
  if (op == c10d::ReduceOp::PREMUL_SUM) {
    throw Error(std::string("nano: ") + what + ": ReduceOp.PREMUL_SUM is NCCL's alone (Gloo has none either)");
  }
  const bool bitwise = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
  if (bitwise && at::isFloatingType(type)) {
    throw Error(std::string("nano: ") + what + ": bitwise reductions need an integer dtype, got " +
                c10::toString(type));
  }
}

void check_like(const at::Tensor& tensor, const at::Tensor& like, const char* what) {
  check_cpu(tensor, what);
  if (tensor.scalar_type() != like.scalar_type() || tensor.numel() != like.numel()) {
    throw Error(std::string("nano: ") + what + ": expected a " + c10::toString(like.scalar_type()) + " tensor of " +
                std::to_string(like.numel()) + " elements, got a " + c10::toString(tensor.scalar_type()) +
                " tensor of " + std::to_string(tensor.numel()));
  }
}

// Every tensor of a list of lists, in order (a Work's outputs).
std::vector<at::Tensor> flattened(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

// Runs `body` on a contiguous form of `tensor` and copies the result back when a copy was made.
template <class Body>
void on_contiguous(at::Tensor& tensor, Body body) {
  if (tensor.is_contiguous()) {
    body(tensor);
    return;
  }
  at::Tensor dense = tensor.contiguous();
  body(dense);
  tensor.copy_(dense);
}

}  // namespace

TorchBackend::Options torch_backend_options(int rank, int size, std::chrono::milliseconds timeout) {
  TorchBackend::Options options;
  options.rank = rank;
  options.size = size;
  options.timeout = timeout;
  options.shm_bytes = shm_bytes_from_environment();
  if (const char* addr = std::getenv("MASTER_ADDR")) options.master_addr = addr;
  return options;
}

TorchBackend::TorchBackend(const c10::intrusive_ptr<c10d::Store>& store, const Options& options)
    : TorchBackendBase(options.rank, options.size), timeout_(options.timeout) {
  if (!options.make_gloo_group) throw Error("nano: TorchBackend::Options::make_gloo_group is not set");
  const int rank = options.rank, size = options.size;
  // Which ranks share this host decides the path: shared memory only if all do.
  store->set("nano/host/" + std::to_string(rank), [] {
    const std::string id = host_identity();
    return std::vector<uint8_t>(id.begin(), id.end());
  }());
  await_ranks(*store, "nano/host/", rank, size, timeout_,
              options.join_within.count() >= 0 ? std::min(options.join_within, timeout_) : timeout_);
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < size; ++r) {
    const std::vector<uint8_t> id = store->get("nano/host/" + std::to_string(r));
    // A host name and a device number: bounded before use, whoever wrote it.
    if (id.size() > 512)
      throw Error("nano: rank " + std::to_string(r) + "'s host entry in the store is over 512 bytes");
    host_of_rank.push_back(text_of(id));
  }
  const bool one_host =
      std::all_of(host_of_rank.begin(), host_of_rank.end(), [&](const auto& h) { return h == host_of_rank[0]; });

  if (one_host && size > 1 && options.shm_bytes > 0) {
    SharedWorld world = join_shared_memory(*store, rank, size, options.shm_bytes, timeout_, "nano");
    shm_ = std::move(world.collectives);
    if (shm_) shm_->set_bound_name("the process group's timeout");
    shm_memory_ = std::move(world.memory);
  }
  // Across the hosts of a nano-run job, torch's own store admits whoever reaches it.
  if (!one_host && rank == 0 && !job_store_under(store) && !job_secret_from_environment().empty())
    std::cerr << "nano: this job spans hosts and meets in torch's TCPStore on " << options.master_addr
              << ", which anyone who reaches it can read and write; init_process_group(\"nano\", "
                 "init_method=\"nano://\") meets in nano's job store, which admits only this job's ranks"
              << std::endl;
  // Gloo's own bound on each of its operations is the group's timeout; on one host it listens
  // on loopback only.
  const GlooBinding where = choose_gloo_binding(options.master_addr, !one_host, rank);
  try {
    gloo_ = options.make_gloo_group(c10::make_intrusive<c10d::PrefixStore>("nano/gloo", store), rank, size, timeout_,
                                    where);
  } catch (const std::exception& e) {
    throw Error("nano: rank " + std::to_string(rank) +
                ": the nano backend's Gloo group did not connect: " + first_line(e.what()));
  }
  if (!one_host) {
    std::string flat_because;
    join_across_hosts(store, host_of_rank, options, where, &flat_because);
    if (rank == 0 && !flat_because.empty()) {  // said once
      std::cerr << "nano: across hosts the all-reduce is flat (every rank through Gloo), not hierarchical: "
                << flat_because << std::endl;
    }
  }
  std::shared_ptr<CallCheck> gloo_check;
  if (host_shm_) {
    // Across hosts, hierarchically: this host's ranks compare in shared memory, one rank per
    // host through Gloo. Every operation of the group is checked so, hierarchical or not, so
    // that the ranks' checks always meet each other.
    gloo_check = std::make_shared<CallCheck>([this](const CollectiveSignature& mine) {
      return gather_signatures_across(*host_shm_, *across_, host_of_, mine);
    });
  } else if (!shm_ && size > 1) {
    // One small Gloo all-gather of every rank's signature before each collective: where no
    // shared memory carries them, this is what keeps mismatched calls from moving data.
    gloo_check = std::make_shared<CallCheck>(
        [this](const CollectiveSignature& mine) { return gather_signatures(*gloo_, getSize(), mine); });
  }
  route_ = CollectiveRoute(shm_.get(), std::move(gloo_check));
  thread_ = std::make_unique<SerialExecutor>();
  register_backend_executor(*thread_);
}

void TorchBackend::join_across_hosts(const c10::intrusive_ptr<c10d::Store>& store,
                                     const std::vector<std::string>& host_of_rank, const Options& options,
                                     const GlooBinding& where, std::string* why_not) {
  SharedHost host = join_host_memory(store, host_of_rank, options.rank, options.shm_bytes, timeout_, "nano");
  *why_not = host.flat_because;
  if (!host.world.collectives) return;
  const int local_rank = host.layout.local_rank;
  try {
    across_ = options.make_gloo_group(
        c10::make_intrusive<c10d::PrefixStore>("nano/gloo-local-" + std::to_string(local_rank), store),
        host.layout.host, host.layout.hosts, timeout_, where);
  } catch (const std::exception& e) {
    throw Error("nano: rank " + std::to_string(options.rank) +
                ": the nano backend's Gloo group across hosts (local rank " + std::to_string(local_rank) +
                ") did not connect: " + first_line(e.what()));
  }
  host_shm_ = std::move(host.world.collectives);
  host_shm_->set_bound_name("the process group's timeout");
  host_memory_ = std::move(host.world.memory);
  across_thread_ = std::make_unique<SerialExecutor>();
  host_of_ = host.layout.host_of;
}

TorchBackend::~TorchBackend() {
  unregister_backend_executor(*thread_);
  // What was issued runs to its end (each bounded by the timeout), its futures completed; then
  // peers still waiting for this rank in a shared-memory collective learn at once that it left.
  // A future's callback may be Python (a DDP communication hook's then()) and need the GIL, which
  // a Python caller dropping the group (destroy_process_group) holds: it is let go meanwhile.
  PyThreadState* python = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  thread_.reset();
  if (python) PyEval_RestoreThread(python);
  if (shm_) shm_->leave();
  if (host_shm_) host_shm_->leave();
}

std::string TorchBackend::broken() const {
  std::lock_guard<std::mutex> lock(broken_mutex_);
  return broken_;
}

void TorchBackend::check_root(int root, const char* what) const {
  if (root < 0 || root >= getSize()) {
    throw Error(std::string("nano: ") + what + ": root rank " + std::to_string(root) + " is outside the group of " +
                std::to_string(getSize()));
  }
}

c10::intrusive_ptr<c10d::Work> TorchBackend::enqueue(c10d::OpType type, const char* what,
                                                     std::vector<at::Tensor> outputs, std::function<void()> body) {
  if (const std::string reason = broken(); !reason.empty()) {
    throw Error(std::string("nano: ") + what + " after an earlier collective of this group failed: " + reason);
  }
  timeline::collective_issued();  // where a backward's compute ended, for the timeline's exchange wait
  issued_.fetch_add(1, std::memory_order_relaxed);
  // A little longer than the group's timeout: every collective below is bounded by that
  // itself and then says which peer it waited for, which is the better message.
  auto work =
      c10::make_intrusive<NanoWork>(getRank(), type, what, std::move(outputs), timeout_ + std::chrono::seconds(5));
  auto run = [this, work, body = std::move(body), what]() mutable {
    std::exception_ptr error;
    if (const std::string reason = broken(); !reason.empty()) {
      // Queued before the failure: its peers are out of step, so it must not touch the
      // shared areas (it could pass a fence of another collective) nor wait a timeout more.
      error = std::make_exception_ptr(
          Error(std::string("nano: ") + what + " after an earlier collective of this group failed: " + reason));
    } else {
      try {
        body();
      } catch (const std::exception& e) {
        const std::string line = first_line(e.what());
        {
          std::lock_guard<std::mutex> lock(broken_mutex_);
          if (broken_.empty()) broken_ = line;
        }
        error = std::make_exception_ptr(
            Error(line.rfind("nano: ", 0) == 0 ? line : std::string("nano: ") + what + " failed: " + line));
      }
    }
    body = nullptr;  // the tensors it captured are released here, before anyone is woken
    const TorchBackend* outer = running_on_thread;
    running_on_thread = this;  // collectives the future's callbacks issue run inline (below)
    work->finish(error);
    running_on_thread = outer;
  };
  if (running_on_thread == this) {
    // Issued by a callback of one of this group's futures, on the backend's thread: run now.
    // Queued, it would wait behind the callback that waits for it; and here it takes the same
    // place in every rank's sequence, right after the operation whose callback issued it.
    run();
  } else {
    thread_->submit(std::move(run));
  }
  return work;
}

void TorchBackend::gloo_wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
  try {
    work->wait();  // bounded by Gloo's own timeout, the group's
  } catch (const std::exception& e) {
    throw Error(std::string("nano: ") + what + " (through Gloo) failed: " + first_line(e.what()));
  }
}

std::function<void()> TorchBackend::start_gloo_all_reduce(TorchBackendBase& group, at::Tensor& tensor, RedOp op) {
  // Gloo has no AVG: a sum, divided after. A 16-bit float's sum travels as 16 bits; Debian's
  // Gloo has no bfloat16 reduction at all, so its other ops take a float copy, rounded back once.
  const bool average = op == c10d::ReduceOp::AVG;
  const bool sum = average || op == c10d::ReduceOp::SUM;
  const bool sixteen_bits = tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf;
  const bool widen = tensor.scalar_type() == at::kBFloat16 && !sum;
  at::Tensor work_on = widen ? tensor.to(at::kFloat) : tensor;
  c10::intrusive_ptr<c10d::Work> work;
  if (sixteen_bits && sum) {
    auto ring = [this, &group, work_on]() mutable {
      ring_sum_16bit(group, work_on,
                     [this](const c10::intrusive_ptr<c10d::Work>& step, const char* what) { gloo_wait(step, what); });
    };
    if (&group == across_.get()) {
      // On a thread of its own, so that the next block's reduce-scatter overlaps it.
      std::shared_ptr<Completion> done = across_thread_->submit(std::move(ring));
      return [done, average, work_on, size = group.getSize()]() mutable {
        done->wait();
        if (average) work_on.div_(size);
      };
    }
    ring();
  } else {
    std::vector<at::Tensor> tensors{borrowed(work_on)};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp(average ? c10d::ReduceOp::SUM : op);
    work = group.allreduce(tensors, opts);
  }
  return [this, work, tensor, work_on, average, widen, size = group.getSize()]() mutable {
    if (work) gloo_wait(work, "all_reduce");
    if (average) {
      if (at::isFloatingType(work_on.scalar_type())) {
        work_on.div_(size);
      } else {
        work_on.div_(size, "trunc");
      }
    }
    if (widen) tensor.copy_(work_on);
  };
}

void TorchBackend::gloo_all_reduce(TorchBackendBase& group, at::Tensor& tensor, RedOp op) {
  start_gloo_all_reduce(group, tensor, op)();
}

void TorchBackend::all_reduce_now(at::Tensor& tensor, RedOp op) {
  ShmReduceOp fast = ShmReduceOp::kSum;  // set by shm_op where shared memory serves `op`
  const bool shm_serves = shm_op(op, &fast);
  const int average_over = op == c10d::ReduceOp::AVG ? getSize() : 1;
  on_contiguous(tensor, [&](at::Tensor& t) {
    if (host_shm_ && shm_serves) {
      // Every rank's call compared first, as for every operation of the group (within each host,
      // then one rank per host): a mismatch with any other kind of call fails the same way.
      route_.run_on_peer(all_reduce_signature(t, op, getSize()), [&] {
        host_shm_->all_reduce_across(t, fast, average_over, [&](at::Tensor& slice) {
          return start_gloo_all_reduce(*across_, slice, op == c10d::ReduceOp::AVG ? c10d::ReduceOp::SUM : op);
        });
      });
      return;
    }
    route_.run(
        all_reduce_signature(t, op, getSize()), shm_serves,
        [&](ShmCollectives& shm) { shm.all_reduce(t, fast, average_over); }, [&] { gloo_all_reduce(*gloo_, t, op); });
  });
}

void TorchBackend::broadcast_now(at::Tensor& tensor, int root) {
  on_contiguous(tensor, [&](at::Tensor& t) {
    if (host_shm_) {
      route_.run_on_peer(signature_of(CollectiveKind::kBroadcast, t, root), [&] { broadcast_across(t, root); });
      return;
    }
    route_.run(
        signature_of(CollectiveKind::kBroadcast, t, root), true, [&](ShmCollectives& shm) { shm.broadcast(t, root); },
        [&] {
          std::vector<at::Tensor> tensors{borrowed_bytes(t)};
          c10d::BroadcastOptions opts;
          opts.rootRank = root;
          gloo_wait(gloo_->broadcast(tensors, opts), "broadcast");
        });
  });
}

void TorchBackend::broadcast_across(at::Tensor& t, int root) {
  // The root's bytes cross to each other host once, to the rank of the root's local index there
  // (that index's Gloo group, whose ranks are the hosts), and each host then spreads them
  // through its shared memory from that rank: a flat Gloo broadcast would send them from the
  // root to every rank of every other host.
  const int root_local = local_rank_of(host_of_, root);
  if (local_rank_of(host_of_, getRank()) == root_local) {
    std::vector<at::Tensor> tensors{borrowed_bytes(t)};
    c10d::BroadcastOptions opts;
    opts.rootRank = host_of_[root];
    gloo_wait(across_->broadcast(tensors, opts), "broadcast between hosts");
  }
  host_shm_->broadcast(t, root_local);
}

// `outputs`: getSize() tensors of the input's dtype and numel (checked by the caller).
void TorchBackend::all_gather_now(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  const at::Tensor in = input.contiguous();
  std::vector<at::Tensor> dense;
  for (const auto& out : outputs) dense.push_back(out.is_contiguous() ? out : at::empty_like(in));
  if (host_shm_) {
    route_.run_on_peer(signature_of(CollectiveKind::kAllGather, in), [&] { all_gather_across(in, dense); });
  } else {
    route_.run(
        signature_of(CollectiveKind::kAllGather, in), true, [&](ShmCollectives& shm) { shm.all_gather(in, dense); },
        [&] {
          std::vector<std::vector<at::Tensor>> gathered(1);
          for (auto& d : dense) gathered[0].push_back(borrowed_bytes(d));
          std::vector<at::Tensor> inputs{borrowed_bytes(in)};
          gloo_wait(gloo_->allgather(gathered, inputs), "all_gather");
        });
  }
  for (std::size_t q = 0; q < outputs.size(); ++q) {
    if (!outputs[q].is_contiguous()) outputs[q].copy_(dense[q].view(outputs[q].sizes()));
  }
}

void TorchBackend::all_gather_across(const at::Tensor& input, std::vector<at::Tensor>& outputs) {
  // First each local index gathers its hosts' inputs through its own Gloo group, all indices at
  // once; then each host shares those blocks through its shared memory. A host's link then
  // carries each other host's inputs in once, where Gloo's ring over every rank passes every
  // input but one through it.
  if (input.nbytes() == 0) return;  // the same on every rank: its signature was compared
  const int hosts = across_->getSize();
  const at::Tensor bytes = borrowed_bytes(input);
  at::Tensor block = at::empty({hosts, bytes.numel()}, bytes.options());  // row h: host h's input
  {
    std::vector<std::vector<at::Tensor>> gathered(1, block.unbind(0));
    std::vector<at::Tensor> inputs{bytes};
    gloo_wait(across_->allgather(gathered, inputs), "all_gather between hosts");
  }
  const int local_size = getSize() / hosts;
  std::vector<at::Tensor> blocks;  // local index i's block
  for (int i = 0; i < local_size; ++i) blocks.push_back(at::empty_like(block));
  host_shm_->all_gather(block, blocks);
  for (int q = 0; q < getSize(); ++q) {
    borrowed_bytes(outputs[q]).copy_(blocks[local_rank_of(host_of_, q)][host_of_[q]]);
  }
}

void TorchBackend::barrier_now() {
  route_.run(
      CollectiveSignature{}, true, [](ShmCollectives& shm) { shm.barrier(); },
      [&] { gloo_wait(gloo_->barrier(), "barrier"); });
}

// `output` holds getSize() inputs of `input`'s dtype (checked by the caller).
void TorchBackend::all_gather_into_now(const at::Tensor& input, at::Tensor& output) {
  at::Tensor dense = output.is_contiguous() ? output : at::empty(output.sizes(), output.options());
  std::vector<at::Tensor> parts = dense.reshape({getSize(), -1}).unbind(0);
  all_gather_now(input, parts);
  if (!output.is_contiguous()) output.copy_(dense);
}

// An all-reduce of `joined` (the fast path, every dtype and op), of which this rank keeps
// output.numel() elements from `offset`: more bytes than a true reduce-scatter, but never
// unsupported.
void TorchBackend::reduce_keep_slice(at::Tensor joined, RedOp op, int64_t offset, at::Tensor& output) {
  all_reduce_now(joined, op);
  output.copy_(joined.narrow(0, offset, output.numel()).view(output.sizes()));
}

void TorchBackend::check_gathered(const at::Tensor& output, const at::Tensor& input, const char* what) const {
  check_cpu(input, what);
  check_cpu(output, what);
  if (output.numel() != input.numel() * getSize() || output.scalar_type() != input.scalar_type()) {
    throw Error(std::string("nano: ") + what + ": the output must hold " + std::to_string(getSize()) +
                " inputs of the input's dtype (" + std::to_string(input.numel() * getSize()) + " elements), got " +
                std::to_string(output.numel()));
  }
}

void TorchBackend::check_scattered(const at::Tensor& output, const at::Tensor& input, RedOp op,
                                   const char* what) const {
  check_cpu(input, what);
  check_cpu(output, what);
  check_op(op, output.scalar_type(), what);
  if (input.numel() != output.numel() * getSize() || input.scalar_type() != output.scalar_type()) {
    throw Error(std::string("nano: ") + what + ": the input must hold " + std::to_string(getSize()) +
                " outputs of the output's dtype (" + std::to_string(output.numel() * getSize()) + " elements), got " +
                std::to_string(input.numel()));
  }
}

c10::intrusive_ptr<c10d::Work> TorchBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  check_one(tensors, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  check_root(root, "broadcast");
  at::Tensor tensor = tensors[0];
  return enqueue(c10d::OpType::BROADCAST, "broadcast", tensors,
                 [this, tensor, root]() mutable { broadcast_now(tensor, root); });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) return sparse_allreduce(tensors[0], opts);
  check_one(tensors, "all_reduce");
  const RedOp op = opts.reduceOp.op_;
  check_op(op, tensors[0].scalar_type(), "all_reduce");
  at::Tensor tensor = tensors[0];
  return enqueue(c10d::OpType::ALLREDUCE, "all_reduce", tensors, [this, tensor, op]() mutable {
    all_reduce_now(tensor, op);
    step_report::all_reduce(tensor.nbytes());
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::sparse_allreduce(const at::Tensor& tensor,
                                                              const c10d::AllreduceOptions& opts) {
  if (!tensor.device().is_cpu() || opts.reduceOp.op_ != c10d::ReduceOp::SUM) {
    throw Error("nano: all_reduce of a sparse tensor takes a CPU tensor and SUM (as Gloo's does), got one on " +
                tensor.device().str() + (opts.reduceOp.op_ != c10d::ReduceOp::SUM ? " and another op" : ""));
  }
  return enqueue(c10d::OpType::ALLREDUCE, "all_reduce", {tensor}, [this, tensor, opts]() {
    route_.agree(all_reduce_signature(tensor, c10d::ReduceOp::SUM, getSize()));
    std::vector<at::Tensor> tensors{tensor};
    gloo_wait(gloo_->allreduce(tensors, opts), "all_reduce");  // the sum lands in `tensor` itself
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  const RedOp op = opts.reduceOp.op_;
  for (const auto& t : tensors) {
    check_cpu(t, "all_reduce_coalesced");
    check_op(op, t.scalar_type(), "all_reduce_coalesced");
  }
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors, [this, tensors, op]() mutable {
    // One collective over all of them, per run of one dtype, in the order given.
    for (std::size_t i = 0; i < tensors.size();) {
      std::size_t j = i;
      std::vector<at::Tensor> flat;
      while (j < tensors.size() && tensors[j].scalar_type() == tensors[i].scalar_type()) {
        flat.push_back(tensors[j].reshape({-1}));
        ++j;
      }
      at::Tensor joined = at::cat(flat);
      all_reduce_now(joined, op);
      step_report::all_reduce(joined.nbytes());
      int64_t offset = 0;
      for (std::size_t k = i; k < j; ++k) {
        const int64_t n = tensors[k].numel();
        tensors[k].copy_(joined.narrow(0, offset, n).view(tensors[k].sizes()));
        offset += n;
      }
      i = j;
    }
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  check_one(tensors, "reduce");
  const RedOp op = opts.reduceOp.op_;
  check_op(op, tensors[0].scalar_type(), "reduce");
  const int root = static_cast<int>(opts.rootRank);
  check_root(root, "reduce");
  at::Tensor tensor = tensors[0];
  // An all-reduce, kept by the root: the fast path, every dtype and op. The other ranks'
  // tensors are left as they were.
  return enqueue(c10d::OpType::REDUCE, "reduce", tensors, [this, tensor, op, root]() mutable {
    if (getRank() == root) {
      all_reduce_now(tensor, op);
    } else {
      at::Tensor scratch = tensor.clone();
      all_reduce_now(scratch, op);
    }
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  check_one(inputs, "all_gather");
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize()) {
    throw Error("nano: all_gather takes one list of " + std::to_string(getSize()) + " output tensors per rank");
  }
  for (const auto& t : outputs[0]) check_like(t, inputs[0], "all_gather");
  at::Tensor input = inputs[0];
  std::vector<at::Tensor> out = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, "all_gather", out,
                 [this, input, out]() mutable { all_gather_now(input, out); });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions&) {
  check_gathered(output, input, "all_gather_into_tensor");
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output},
                 [this, in, out]() mutable { all_gather_into_now(in, out); });
}

// torch's layout: outputs[q][i] receives rank q's inputs[i].
c10::intrusive_ptr<c10d::Work> TorchBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions&) {
  if (static_cast<int>(outputs.size()) != getSize()) {
    throw Error("nano: all_gather_coalesced takes " + std::to_string(getSize()) + " output lists, got " +
                std::to_string(outputs.size()));
  }
  for (const auto& list : outputs) {
    if (list.size() != inputs.size()) {
      throw Error("nano: all_gather_coalesced: each output list must hold " + std::to_string(inputs.size()) +
                  " tensors, got " + std::to_string(list.size()));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) check_like(list[i], inputs[i], "all_gather_coalesced");
  }
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced", flattened(outputs),
                 [this, inputs, outputs]() mutable {
                   for (std::size_t i = 0; i < inputs.size(); ++i) {
                     std::vector<at::Tensor> column;
                     for (auto& list : outputs) column.push_back(list[i]);
                     all_gather_now(inputs[i], column);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  check_one(inputs, "gather");
  check_root(static_cast<int>(opts.rootRank), "gather");
  if (getRank() == opts.rootRank) {
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize()) {
      throw Error("nano: gather takes one list of " + std::to_string(getSize()) + " output tensors on the root");
    }
    for (const auto& t : outputs[0]) check_like(t, inputs[0], "gather");
  }
  auto body = [this, outputs, inputs, opts]() mutable {
    // Bytes in, bytes out: every dtype; outputs that are not contiguous get theirs copied back.
    std::vector<std::vector<at::Tensor>> dense(outputs.size()), out(outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      for (const auto& t : outputs[i]) {
        dense[i].push_back(t.is_contiguous() ? t : t.contiguous());
        out[i].push_back(borrowed_bytes(dense[i].back()));
      }
    }
    const at::Tensor dense_in = inputs[0].contiguous();
    route_.agree(signature_of(CollectiveKind::kGather, dense_in, static_cast<int>(opts.rootRank)));
    std::vector<at::Tensor> in{borrowed_bytes(dense_in)};
    gloo_wait(gloo_->gather(out, in, opts), "gather");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      for (std::size_t q = 0; q < outputs[i].size(); ++q) {
        if (!outputs[i][q].is_contiguous()) outputs[i][q].copy_(dense[i][q]);
      }
    }
  };
  return enqueue(c10d::OpType::GATHER, "gather", flattened(outputs), std::move(body));
}

c10::intrusive_ptr<c10d::Work> TorchBackend::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  check_one(outputs, "scatter");
  check_root(static_cast<int>(opts.rootRank), "scatter");
  if (getRank() == opts.rootRank) {
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize()) {
      throw Error("nano: scatter takes one list of " + std::to_string(getSize()) + " input tensors on the root");
    }
    for (const auto& t : inputs[0]) check_like(t, outputs[0], "scatter");
  }
  at::Tensor output = outputs[0];
  return enqueue(c10d::OpType::SCATTER, "scatter", outputs, [this, output, inputs, opts]() mutable {
    on_contiguous(output, [&](at::Tensor& dense_out) {
      route_.agree(signature_of(CollectiveKind::kScatter, dense_out, static_cast<int>(opts.rootRank)));
      std::vector<std::vector<at::Tensor>> dense(inputs.size()), in(inputs.size());
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        for (const auto& t : inputs[i]) {
          dense[i].push_back(t.contiguous());
          in[i].push_back(borrowed_bytes(dense[i].back()));
        }
      }
      std::vector<at::Tensor> out{borrowed_bytes(dense_out)};
      gloo_wait(gloo_->scatter(out, in, opts), "scatter");
    });
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  check_one(outputs, "reduce_scatter");
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize()) {
    throw Error("nano: reduce_scatter takes " + std::to_string(getSize()) + " input tensors per rank");
  }
  const RedOp op = opts.reduceOp.op_;
  check_op(op, outputs[0].scalar_type(), "reduce_scatter");
  for (const auto& t : inputs[0]) check_cpu(t, "reduce_scatter");
  check_like(inputs[0][getRank()], outputs[0], "reduce_scatter");
  for (const auto& t : inputs[0]) {
    if (t.scalar_type() != outputs[0].scalar_type()) {
      throw Error(std::string("nano: reduce_scatter: every input must be ") + c10::toString(outputs[0].scalar_type()) +
                  ", got " + c10::toString(t.scalar_type()));
    }
  }
  at::Tensor output = outputs[0];
  std::vector<at::Tensor> parts = inputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, [this, output, parts, op]() mutable {
    std::vector<at::Tensor> flat;
    for (const auto& p : parts) flat.push_back(p.reshape({-1}));
    int64_t offset = 0;
    for (int q = 0; q < getRank(); ++q) offset += parts[q].numel();
    reduce_keep_slice(at::cat(flat), op, offset, output);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  const RedOp op = opts.reduceOp.op_;
  check_scattered(output, input, op, "reduce_scatter_tensor");
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output}, [this, in, out, op]() mutable {
    reduce_keep_slice(in.reshape({-1}).clone(), op, out.numel() * getRank(), out);
  });
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> TorchBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::AllgatherOptions&) {
  if (outputs.size() != inputs.size()) {
    throw Error("nano: all_gather_into_tensor (coalesced): " + std::to_string(inputs.size()) + " inputs but " +
                std::to_string(outputs.size()) + " outputs");
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_gathered(outputs[i], inputs[i], "all_gather_into_tensor (coalesced)");
    if (!outputs[i].is_contiguous()) {
      throw Error("nano: all_gather_into_tensor (coalesced): output " + std::to_string(i) + " is not contiguous");
    }
  }
  return enqueue(c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced", outputs,
                 [this, outputs, inputs]() mutable {
                   for (std::size_t i = 0; i < inputs.size(); ++i) all_gather_into_now(inputs[i], outputs[i]);
                 });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() != inputs.size()) {
    throw Error("nano: reduce_scatter_tensor (coalesced): " + std::to_string(inputs.size()) + " inputs but " +
                std::to_string(outputs.size()) + " outputs");
  }
  const RedOp op = opts.reduceOp.op_;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_scattered(outputs[i], inputs[i], op, "reduce_scatter_tensor (coalesced)");
  }
  return enqueue(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", outputs,
                 [this, outputs, inputs, op]() mutable {
                   for (std::size_t i = 0; i < inputs.size(); ++i) {
                     reduce_keep_slice(inputs[i].reshape({-1}).clone(), op, outputs[i].numel() * getRank(), outputs[i]);
                   }
                 });
}
#endif

c10::intrusive_ptr<c10d::Work> TorchBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_split_sizes,
                                                           std::vector<int64_t>& input_split_sizes,
                                                           const c10d::AllToAllOptions& opts) {
  check_cpu(input, "all_to_all_single");
  check_cpu(output, "all_to_all_single");
  if (input.scalar_type() != output.scalar_type()) check_like(input, output, "all_to_all_single");
  at::Tensor in = input, out = output;
  std::vector<int64_t> out_splits = output_split_sizes, in_splits = input_split_sizes;
  return enqueue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output},
                 [this, in, out, out_splits, in_splits, opts]() mutable {
                   const at::Tensor dense_in = in.contiguous();
                   route_.agree(all_to_all_signature(dense_in));
                   on_contiguous(out, [&](at::Tensor& dense_out) {
                     at::Tensor gloo_in = borrowed(dense_in), gloo_out = borrowed(dense_out);
                     gloo_wait(gloo_->alltoall_base(gloo_out, gloo_in, out_splits, in_splits, opts),
                               "all_to_all_single");
                   });
                 });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  if (static_cast<int>(outputs.size()) != getSize() || static_cast<int>(inputs.size()) != getSize()) {
    throw Error("nano: all_to_all takes " + std::to_string(getSize()) + " input and output tensors per rank");
  }
  for (const auto& t : inputs) check_cpu(t, "all_to_all");
  for (const auto& t : outputs) check_cpu(t, "all_to_all");
  // Gloo's list form is missing in some versions: the single-tensor form over the joined
  // bytes serves every version and dtype.
  return enqueue(c10d::OpType::ALLTOALL, "all_to_all", outputs, [this, outputs, inputs, opts]() mutable {
    route_.agree(all_to_all_signature(inputs[0]));
    std::vector<at::Tensor> in_bytes;
    std::vector<int64_t> in_splits, out_splits;
    for (const auto& t : inputs) {
      in_bytes.push_back(borrowed_bytes(t.contiguous()).clone());
      in_splits.push_back(static_cast<int64_t>(t.nbytes()));
    }
    for (const auto& t : outputs) out_splits.push_back(static_cast<int64_t>(t.nbytes()));
    at::Tensor joined_in = at::cat(in_bytes);
    int64_t total = 0;
    for (int64_t n : out_splits) total += n;
    at::Tensor joined_out = at::empty({total}, at::TensorOptions().dtype(at::kByte));
    // Gloo takes (moves from) the split vectors it is given: give it copies.
    std::vector<int64_t> out_counts = out_splits, in_counts = in_splits;
    gloo_wait(gloo_->alltoall_base(joined_out, joined_in, out_counts, in_counts, opts), "all_to_all");
    int64_t offset = 0;
    for (std::size_t q = 0; q < outputs.size(); ++q) {
      at::Tensor dense = outputs[q].is_contiguous() ? outputs[q] : outputs[q].contiguous();
      borrowed_bytes(dense).copy_(joined_out.narrow(0, offset, out_splits[q]));
      if (!outputs[q].is_contiguous()) outputs[q].copy_(dense);
      offset += out_splits[q];
    }
  });
}

// Point-to-point goes straight to Gloo, outside the queue: a send and the matching receive are
// issued in different orders on the two ranks, so serialising them could deadlock. Gloo's work
// outlives the call, so the bytes it is given keep the tensor alive.
c10::intrusive_ptr<c10d::Work> TorchBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  check_one(tensors, "send");
  std::vector<at::Tensor> bytes{owned_bytes(tensors[0].contiguous())};
  return gloo_->send(bytes, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> TorchBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  check_one(tensors, "recv");
  if (!tensors[0].is_contiguous()) throw Error("nano: recv needs a contiguous tensor");
  std::vector<at::Tensor> bytes{owned_bytes(tensors[0])};
  return gloo_->recv(bytes, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> TorchBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  check_one(tensors, "recv");
  if (!tensors[0].is_contiguous()) throw Error("nano: recv needs a contiguous tensor");
  std::vector<at::Tensor> bytes{owned_bytes(tensors[0])};
  return gloo_->recvAnysource(bytes, tag);
}

c10::intrusive_ptr<c10d::Work> TorchBackend::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, [this]() { barrier_now(); });
}

void TorchBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // Ordered after every operation issued before it: this rank's own queue drains first (a local
  // step, not a barrier, which would wait for the late ranks this one must name). Then Gloo's,
  // which names the ranks that did not arrive, in what is left of the caller's timeout (the
  // group's when unset). (torch's dist.monitored_barrier admits only the gloo backend; nano_torch
  // lets it reach this, as ProcessGroup.monitored_barrier and the C++ API do.)
  using std::chrono::milliseconds;
  if (opts.timeout < milliseconds(0) && opts.timeout != c10d::kUnsetTimeout) {
    throw Error("nano: monitored_barrier: bad timeout " + std::to_string(opts.timeout.count()) +
                " ms: expected 0 or more");
  }
  const milliseconds limit = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const auto start = std::chrono::steady_clock::now();
  // Always drained first: Gloo's barrier below uses the Gloo group, which queued operations may
  // still be using. A timeout of 0 leaves no time of its own to drain (and Work::wait(0) would
  // mean "the group's" anyway): the drain then takes up to the group's timeout, and Gloo reports
  // rank 0 as timed out, as on a gloo group.
  enqueue(c10d::OpType::BARRIER, "monitored_barrier", {}, [] {})->wait(limit > milliseconds(0) ? limit : timeout_);
  c10d::BarrierOptions rest = opts;
  // What is left of the caller's time, at least 1 ms: Gloo takes 0 (given by the caller) to mean
  // "report at once", but its wait_all_ranks path would read a 0 left over as "no bound".
  rest.timeout =
      opts.timeout == milliseconds(0)
          ? milliseconds(0)
          : std::max(milliseconds(1),
                     limit - std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start));
  gloo_->monitoredBarrier(rest, wait_all_ranks);
}

void TorchBackend::setSequenceNumberForGroup() {
  // Nothing to agree on: every rank's count starts at 0 with the group, as Gloo's does.
}

uint64_t TorchBackend::getSequenceNumberForGroup() { return issued_.load(std::memory_order_relaxed); }

}  // namespace nano
