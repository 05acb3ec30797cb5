#include "runtime/gloo_communicator.h"

#include "runtime/net_address.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include <nano/error.h>
#include "runtime/rendezvous.h"
#include "runtime/serial_executor.h"
#include "runtime/shm_all_reduce.h"

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

}  // namespace

GlooCommunicator::GlooCommunicator(const Context& context, std::size_t shm_segment_bytes) {
  rank_ = context.rank;
  size_ = context.world_size;
  store_ = rendezvous(context, "nano/rank/");
  // Gloo's own bound on each collective (c10d's default is 30 minutes).
  auto options = c10d::ProcessGroupGloo::Options::create(context.collective_timeout);
  const bool multi_host = context.local_world_size < context.world_size;
  std::string transport;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    transport = std::string("interface ") + ifname + " (GLOO_SOCKET_IFNAME)";
  } else if (multi_host) {
    // Gloo's default would advertise what the hostname resolves to: 127.0.1.1 on a typical
    // Debian host, unreachable from the others. Take the address that reaches the master.
    const char* host_addr = std::getenv("NANO_HOST_ADDR");
    const std::string address = multi_host_address(context.master_addr, host_addr ? host_addr : "");
    if (address.empty()) {
      throw Error("nano: rank " + std::to_string(rank_) + " has no address that reaches " + context.master_addr +
                  " (set GLOO_SOCKET_IFNAME to the interface other hosts reach this one through)");
    }
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address));
    const std::string name = interface_of(address);
    transport = address + (name.empty() ? "" : " (" + name + ")");
  } else if (is_loopback_address(context.master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(context.master_addr));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  if (multi_host && rank_ == 0) {
    std::cerr << "nano: gloo communicator: " << context.world_size << " ranks on several hosts; TCP between and within "
              << "hosts, rank 0 through " << transport << std::endl;
  }
  options->threads = 2;
  try {
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size_, options);
  } catch (const std::exception& e) {
    throw Error("nano: gloo connection through " + context.master_addr + ":" + std::to_string(context.master_port) +
                " failed: " + first_line(e.what()));
  }
  connect_shared_memory(context, shm_segment_bytes);
  // Every rank has connected before any returns, so rank 0's store may go away later.
  barrier();
}

GlooCommunicator::~GlooCommunicator() {
  // Peers waiting for this rank in a shared-memory all-reduce learn at once that it left.
  if (shm_) shm_->leave();
}

// Decided by all ranks together through the store: rank 0 creates the object and publishes
// its name, every rank reports whether it could map it (a rank in another container or on
// another host cannot), and all use it only if all could. Anything short of that keeps Gloo.
void GlooCommunicator::connect_shared_memory(const Context& context, std::size_t segment_bytes) {
  if (size_ < 2 || segment_bytes == 0 || context.local_world_size != size_) return;
  static std::atomic<int> serial{0};
  const std::size_t area = ShmAllReduce::kHeaderBytes + segment_bytes;
  const std::size_t total = area * static_cast<std::size_t>(size_);
  const std::string name_key = "nano/shm/name";
  std::unique_ptr<SharedMemory> memory;
  try {
    std::string name;
    if (rank_ == 0) {
      // Under nano-run the name starts with the job's id, so the launcher (or its guardian, if
      // the launcher is killed) removes it when a rank dies before the name is unlinked below.
      const char* job = std::getenv("NANO_JOB_ID");
      name = "/nano-" + (job && *job ? std::string(job) : std::to_string(getpid())) + "-" +
             std::to_string(context.master_port) + "-" + std::to_string(serial++);
      try {
        memory = SharedMemory::create(name, total);
      } catch (const Error& e) {
        // Say why once: the job still runs, but every all-reduce now goes through TCP.
        std::cerr << e.what() << "; all-reduce goes through Gloo over TCP instead (NANO_SHM_BYTES=0 "
                  << "chooses that quietly)" << std::endl;
        name.clear();
      }
      store_->set(name_key, std::vector<uint8_t>(name.begin(), name.end()));
    } else {
      const auto value = store_->get(name_key);
      name.assign(value.begin(), value.end());
      if (!name.empty()) {
        try {
          memory = SharedMemory::open(name, total);
        } catch (const Error& e) {
          // This rank reports "not mapped" below, so every rank falls back to TCP; say why.
          std::cerr << "nano: rank " << rank_ << ": " << e.what() << "; all-reduce goes through Gloo over TCP instead"
                    << std::endl;
        }
      }
    }
    if (memory) ShmAllReduce::init_header(memory->data() + area * rank_);
    // Reporting also orders every header's initialisation before anyone's first all-reduce.
    store_->set("nano/shm/ok/" + std::to_string(rank_), std::vector<uint8_t>{uint8_t(memory ? 1 : 0)});
    bool everyone = true;
    for (int r = 0; r < size_; ++r) {
      const auto ok = store_->get("nano/shm/ok/" + std::to_string(r));
      everyone = everyone && !ok.empty() && ok[0] == 1;
    }
    // Every rank has mapped it or given up: the name can go, so a killed job leaves nothing
    // in /dev/shm.
    if (memory && rank_ == 0) memory->unlink();
    if (!everyone) return;
  } catch (const std::exception& e) {
    throw Error("nano: rendezvous at " + context.master_addr + ":" + std::to_string(context.master_port) +
                " failed while agreeing on shared memory: " + first_line(e.what()));
  }
  std::vector<char*> areas;
  for (int q = 0; q < size_; ++q) areas.push_back(memory->data() + area * q);
  shm_ = std::make_unique<ShmAllReduce>(std::move(areas), static_cast<int64_t>(segment_bytes), rank_,
                                        context.collective_timeout);
  shm_memory_ = std::move(memory);
  shm_thread_ = std::make_unique<SerialExecutor>();
}

void GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  check_broadcastable(tensor, root, size_);
  // Gloo lacks some dtypes (bool, bfloat16): broadcast the bytes.
  std::vector<at::Tensor> tensors{
      at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())}, at::TensorOptions().dtype(at::kByte))};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  GlooWork(group_->broadcast(tensors, opts), nullptr).wait();
}

std::unique_ptr<Work> GlooCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  check_reducible(tensor, "all_reduce");
  const int size = size_;
  const bool average = op == ReduceOp::kAverage && size > 1;
  if (shm_ && static_cast<int64_t>(tensor.nbytes()) >= ShmAllReduce::kMinBytes) {
    // The task holds its own reference so the storage outlives the collective.
    ShmAllReduce* shm = shm_.get();
    return std::make_unique<CompletionWork>(shm_thread_->submit(
        [shm, tensor, average, size]() mutable { shm->all_reduce(tensor, average ? 1.0 / size : 1.0); }));
  }
  if (tensor.scalar_type() == at::kBFloat16) {
    // Debian's Gloo build has no bfloat16 reduction: reduce a float copy.
    at::Tensor wide = tensor.to(at::kFloat);
    std::vector<at::Tensor> tensors{wide};
    auto work = group_->allreduce(tensors);
    return std::make_unique<GlooWork>(work, [tensor, wide, average, size]() mutable {
      if (average) wide.div_(size);
      tensor.copy_(wide);
    });
  }
  std::vector<at::Tensor> tensors{tensor};
  auto work = group_->allreduce(tensors);
  std::function<void()> after;
  if (average) after = [tensor, size]() mutable { tensor.div_(size); };
  return std::make_unique<GlooWork>(work, std::move(after));
}

void GlooCommunicator::barrier() { GlooWork(group_->barrier(), nullptr).wait(); }

std::vector<double> GlooCommunicator::gather(const std::vector<double>& values) {
  auto dbl = at::TensorOptions().dtype(at::kDouble);
  at::Tensor in = at::empty({static_cast<int64_t>(values.size())}, dbl);
  std::copy(values.begin(), values.end(), in.data_ptr<double>());
  std::vector<at::Tensor> inputs{in};
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank_ == 0) {
    outputs.emplace_back();
    for (int r = 0; r < size_; ++r) outputs[0].push_back(at::empty_like(in));
  }
  c10d::GatherOptions opts;
  opts.rootRank = 0;
  GlooWork(group_->gather(outputs, inputs, opts), nullptr).wait();
  std::vector<double> result;
  if (rank_ == 0) {
    for (auto& t : outputs[0]) result.insert(result.end(), t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }
  return result;
}

}  // namespace nano
