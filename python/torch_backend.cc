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
#include "python/torch_backend_checks.h"
#include "runtime/collectives/gloo_signatures.h"
#include "runtime/collectives/host_layout.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/collectives/shm_rendezvous.h"
#include "runtime/rendezvous/job_store.h"
#include "runtime/rendezvous/rendezvous.h"
#include "runtime/timeline/recorder.h"

namespace nano {

using namespace torch_backend_detail;

namespace {

// The backend whose future's callbacks this thread is running (null elsewhere).
thread_local const TorchBackend* running_on_thread = nullptr;

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

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
  if (sixteen_bits && sum) {
    // Between hosts on a thread of its own, so that the next block's reduce-scatter overlaps it.
    SerialExecutor* ring_thread = &group == across_.get() ? across_thread_.get() : nullptr;
    std::function<void()> done =
        start_gloo_sum(group, work_on, true, ring_thread,
                       [this](const c10::intrusive_ptr<c10d::Work>& step, const char* what) { gloo_wait(step, what); });
    return [done, average, work_on, size = group.getSize()]() mutable {
      done();
      if (average) work_on.div_(size);
    };
  }
  std::vector<at::Tensor> tensors{borrowed(work_on)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp(average ? c10d::ReduceOp::SUM : op);
  c10::intrusive_ptr<c10d::Work> work = group.allreduce(tensors, opts);
  return [this, work, tensor, work_on, average, widen, size = group.getSize()]() mutable {
    gloo_wait(work, "all_reduce");
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

}  // namespace nano
