#include "runtime/communicators/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include <nano/error.h>
#include "runtime/collectives/gloo_device.h"
#include "runtime/collectives/gloo_signatures.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/collectives/shm_rendezvous.h"
#include "runtime/collectives/wire_ring.h"
#include "runtime/rendezvous/rendezvous.h"

namespace nano {

namespace {

class GlooWork : public Work {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> work, std::function<void()> after)
      : work_(std::move(work)), after_(std::move(after)) {}
  ~GlooWork() override {
    try {
      if (!waited_) wait();
    } catch (...) {
      // A destructor must not throw; whoever cared about this collective called wait() and saw
      // its error there. An unwaited handle dropped during unwinding adds nothing to report.
    }
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    try {
      work_->wait();  // bounded by Gloo's own timeout (context.collective_timeout)
    } catch (const std::exception& e) {
      throw Error(std::string("nano: gloo all_reduce failed: ") + first_line(e.what()));
    }
    if (after_) after_();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::function<void()> after_;
  bool waited_ = false;
};

// Waits for one of Gloo's steps (bounded by the group's timeout), naming it and `where` on failure.
void wait_gloo(const c10::intrusive_ptr<c10d::Work>& work, const char* what, const char* where) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw Error(std::string("nano: gloo ") + what + where + " failed: " + first_line(e.what()));
  }
}

// The hierarchical all-reduce's exchange between hosts: starts `slice` summed over `across` and
// returns what waits for it, bounded by the group's timeout. bfloat16 travels as bfloat16
// (Debian's Gloo cannot sum it; widening would double the bytes on the wire).
std::function<void()> start_sum_across(c10d::ProcessGroupGloo& across, SerialExecutor& ring_thread, at::Tensor& slice) {
  return start_gloo_sum(
      across, slice, slice.scalar_type() == at::kBFloat16, &ring_thread,
      [](const c10::intrusive_ptr<c10d::Work>& work, const char* what) { wait_gloo(work, what, " between hosts"); });
}

}  // namespace

GlooCommunicator::GlooCommunicator(const Context& context, std::size_t shm_segment_bytes) {
  rank_ = context.rank;
  size_ = context.world_size;
  store_ = rendezvous(context, "nano/rank/");
  // Gloo's own bound on each collective (c10d's default is 30 minutes).
  auto options = c10d::ProcessGroupGloo::Options::create(context.collective_timeout);
  const bool multi_host = context.local_world_size < context.world_size;
  const GlooBinding where = choose_gloo_binding(context.master_addr, multi_host, rank_);
  options->devices.push_back(make_gloo_device(where));
  const std::string& transport = where.description;
  if (multi_host && rank_ == 0) {
    std::cerr << "nano: gloo communicator: " << context.world_size << " ranks on several hosts; TCP between and within "
              << "hosts, rank 0 through " << transport << std::endl;
  }
  options->threads = 2;
  try {
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size_, options);
    if (multi_host) connect_across_hosts(context, where, shm_segment_bytes);
  } catch (const std::exception& e) {
    throw Error("nano: gloo connection through " + context.master_addr + ":" + std::to_string(context.master_port) +
                " failed: " + first_line(e.what()));
  }
  connect_shared_memory(context, shm_segment_bytes);
  if (!shm_) ring_thread_ = std::make_unique<SerialExecutor>();  // bfloat16 sums through Gloo, flat
  std::shared_ptr<CallCheck> peer_check;
  if ((!shm_ || across_) && size_ > 1) {
    peer_check = std::make_shared<CallCheck>(
        [this](const CollectiveSignature& mine) { return gather_signatures(*group_, size_, mine); });
  }
  // Across hosts the shared memory serves only the hierarchical all-reduce: every call's signature
  // and every other call go through the world's Gloo group.
  route_ = CollectiveRoute(across_ ? nullptr : shm_.get(), std::move(peer_check));
  // Every rank has connected before any returns, so rank 0's store may go away later.
  barrier();
}

GlooCommunicator::~GlooCommunicator() {
  // Peers waiting for this rank in a shared-memory all-reduce learn at once that it left.
  if (shm_) shm_->leave();
}

void GlooCommunicator::connect_across_hosts(const Context& context, const GlooBinding& where,
                                            std::size_t segment_bytes) {
  const std::string mine = host_identity();
  store_->set("nano/host/" + std::to_string(rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < size_; ++r) {
    const auto id = store_->get("nano/host/" + std::to_string(r));
    host_of_rank.emplace_back(id.begin(), id.end());
  }
  SharedHost host = join_host_memory(store_, host_of_rank, rank_, segment_bytes, context.collective_timeout, "nano");
  if (rank_ == 0 && !host.flat_because.empty()) {
    std::cerr << "nano: gloo communicator: all-reduce flat across hosts (every rank through Gloo), not hierarchical: "
              << host.flat_because << std::endl;
  }
  if (!host.world.collectives) return;
  auto options = c10d::ProcessGroupGloo::Options::create(context.collective_timeout);
  options->devices.push_back(make_gloo_device(where));
  options->threads = 2;
  across_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("nano/gloo-local-" + std::to_string(host.layout.local_rank), store_),
      host.layout.host, host.layout.hosts, options);
  shm_ = std::move(host.world.collectives);
  shm_memory_ = std::move(host.world.memory);
  shm_thread_ = std::make_unique<SerialExecutor>();
  ring_thread_ = std::make_unique<SerialExecutor>();
  if (rank_ == 0) {
    std::cerr << "nano: gloo communicator: " << host.layout.hosts << " hosts x " << host.layout.local_size
              << " ranks; all-reduce hierarchical: shared memory within each host, Gloo between the ranks of each "
                 "local index"
              << std::endl;
  }
}

void GlooCommunicator::connect_shared_memory(const Context& context, std::size_t segment_bytes) {
  if (context.local_world_size != size_) return;
  SharedWorld world;
  try {
    world = join_shared_memory(*store_, rank_, size_, segment_bytes, context.collective_timeout, "nano");
  } catch (const std::exception& e) {
    throw Error("nano: rendezvous at " + context.master_addr + ":" + std::to_string(context.master_port) +
                " failed while agreeing on shared memory: " + first_line(e.what()));
  }
  if (!world.collectives) return;
  shm_ = std::move(world.collectives);
  shm_memory_ = std::move(world.memory);
  shm_thread_ = std::make_unique<SerialExecutor>();
}

// Every collective goes through shared memory when the ranks have it (on the thread that runs
// the all-reduces, so they stay in order), at every size: Gloo's TCP loses to shared memory
// even at 4 bytes. Through Gloo otherwise (collective_route.h).

void GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_broadcastable(tensor, root, size_);
  route_.run(
      signature_of(CollectiveKind::kBroadcast, tensor, root), true,
      [&](ShmCollectives& shm) { shm_thread_->run([&shm, &tensor, root] { shm.broadcast(tensor, root); }); },
      [&] {
        // Gloo lacks some dtypes (bool, bfloat16): broadcast the bytes.
        std::vector<at::Tensor> tensors{at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())},
                                                      at::TensorOptions().dtype(at::kByte))};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        GlooWork(group_->broadcast(tensors, opts), nullptr).wait();
      });
}

std::unique_ptr<Work> GlooCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  check_reducible(tensor, "all_reduce");
  const int size = size_;
  const bool average = op == ReduceOp::kAverage && size > 1;
  CollectiveSignature call = signature_of(CollectiveKind::kAllReduce, tensor);
  if (average) call.average = static_cast<int16_t>(size);
  if (across_) {
    return route_.run_on_peer(call, [&]() -> std::unique_ptr<Work> {
      ShmCollectives* area = shm_.get();
      c10d::ProcessGroupGloo* across = across_.get();
      SerialExecutor* rings = ring_thread_.get();
      return std::make_unique<CompletionWork>(
          shm_thread_->submit([area, across, rings, tensor, average, size]() mutable {
            area->all_reduce_across(tensor, ShmReduceOp::kSum, average ? size : 1, [across, rings](at::Tensor& slice) {
              return start_sum_across(*across, *rings, slice);
            });
          }));
    });
  }
  return route_.run(
      call, true,
      [&](ShmCollectives& shm) -> std::unique_ptr<Work> {
        // The task holds its own reference so the storage outlives the collective.
        ShmCollectives* area = &shm;
        return std::make_unique<CompletionWork>(shm_thread_->submit([area, tensor, average, size]() mutable {
          area->all_reduce(tensor, ShmReduceOp::kSum, average ? size : 1);
        }));
      },
      [&]() -> std::unique_ptr<Work> {
        if (tensor.scalar_type() == at::kBFloat16) {
          // Debian's Gloo build has no bfloat16 reduction, and a float copy would double the
          // bytes on the wire: a ring that carries bfloat16 and adds in float32, on a thread of
          // its own (the call returns at once, as Gloo's own all-reduce does).
          c10d::ProcessGroupGloo* group = group_.get();
          return std::make_unique<CompletionWork>(ring_thread_->submit([group, tensor, average, size]() mutable {
            ring_sum_16bit(*group, tensor, [](const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
              wait_gloo(work, what, " in all_reduce");
            });
            if (average) tensor.div_(size);
          }));
        }
        std::vector<at::Tensor> tensors{tensor};
        auto work = group_->allreduce(tensors);
        std::function<void()> after;
        if (average) after = [tensor, size]() mutable { tensor.div_(size); };
        return std::make_unique<GlooWork>(work, std::move(after));
      });
}

void GlooCommunicator::barrier() {
  route_.run(
      CollectiveSignature{}, true, [&](ShmCollectives& shm) { shm_thread_->run([&shm] { shm.barrier(); }); },
      [&] { GlooWork(group_->barrier(), nullptr).wait(); });
}

std::vector<double> GlooCommunicator::gather(const std::vector<double>& values) {
  auto dbl = at::TensorOptions().dtype(at::kDouble);
  at::Tensor in = at::empty({static_cast<int64_t>(values.size())}, dbl);
  std::copy(values.begin(), values.end(), in.data_ptr<double>());
  std::vector<at::Tensor> gathered;
  for (int r = 0; r < size_; ++r) gathered.push_back(at::empty_like(in));
  route_.run(
      signature(CollectiveKind::kGather, static_cast<int8_t>(at::kDouble), in.numel(), 0), true,
      [&](ShmCollectives& shm) {
        // Shared memory has no gather to one rank: every rank gathers, rank 0 keeps it.
        shm_thread_->run([&shm, &in, &gathered] { shm.all_gather(in, gathered); });
      },
      [&] {
        std::vector<at::Tensor> inputs{in};
        std::vector<std::vector<at::Tensor>> outputs;
        if (rank_ == 0) outputs.push_back(gathered);
        c10d::GatherOptions opts;
        opts.rootRank = 0;
        GlooWork(group_->gather(outputs, inputs, opts), nullptr).wait();
      });
  std::vector<double> result;
  if (rank_ == 0) {
    for (auto& t : gathered) result.insert(result.end(), t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }
  return result;
}

}  // namespace nano
