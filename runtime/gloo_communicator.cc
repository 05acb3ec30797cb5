#include "runtime/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "env-init/error.h"

namespace nano {

namespace {

using Clock = std::chrono::steady_clock;

std::string format_seconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::string first_line(const std::string& text) {
  auto nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

class GlooWork : public Work {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> work, std::function<void()> after)
      : work_(std::move(work)), after_(std::move(after)) {}
  ~GlooWork() override {
    try {
      if (!waited_) wait();
    } catch (...) {
    }
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    try {
      work_->wait();
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

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

std::string rendezvous_timeout_message(const std::string& address, int port, double seconds,
                                       const std::vector<int>& missing, int world_size) {
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? "," : "") + std::to_string(missing[i]);
  return "nano: rendezvous at " + address + ":" + std::to_string(port) + " timed out after " +
         format_seconds(seconds) + " s: " + std::to_string(missing.size()) + " of " +
         std::to_string(world_size) + " ranks did not join (missing: " + list + ")";
}

GlooCommunicator::GlooCommunicator(const Context& context)
    : rank_(context.rank), size_(context.world_size) {
  const auto timeout = context.rendezvous_timeout;
  const double seconds = timeout.count() / 1000.0;
  const auto deadline = Clock::now() + timeout;
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(context.master_port);
  opts.isServer = rank_ == 0;
  opts.waitWorkers = false;  // we wait ourselves, to name the missing ranks
  opts.timeout = timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(context.master_addr, opts);
  } catch (const std::exception& e) {
    if (rank_ == 0) {
      throw Error("nano: cannot host the rendezvous store on " + context.master_addr + ":" +
                  std::to_string(context.master_port) + ": " + first_line(e.what()));
    }
    throw Error("nano: rendezvous at " + context.master_addr + ":" +
                std::to_string(context.master_port) + " timed out after " +
                format_seconds(seconds) + " s: the store host (rank 0) did not answer");
  }
  const std::string prefix = "nano/rank/";
  std::vector<int> missing;
  try {
    store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
    for (;;) {
      missing.clear();
      for (int r = 0; r < size_; ++r) {
        if (!store_->check({prefix + std::to_string(r)})) missing.push_back(r);
      }
      if (missing.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    throw Error("nano: rendezvous at " + context.master_addr + ":" +
                std::to_string(context.master_port) + " failed: " + first_line(e.what()));
  }
  if (!missing.empty()) {
    throw Error(rendezvous_timeout_message(context.master_addr, context.master_port, seconds,
                                           missing, size_));
  }

  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::minutes(30));
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (is_loopback(context.master_addr)) {
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(context.master_addr));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = 2;
  try {
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size_, options);
  } catch (const std::exception& e) {
    throw Error("nano: gloo connection through " + context.master_addr + ":" +
                std::to_string(context.master_port) + " failed: " + first_line(e.what()));
  }
  // Every rank has connected before any returns, so rank 0's store may go away later.
  barrier();
}

GlooCommunicator::~GlooCommunicator() = default;

void GlooCommunicator::broadcast(at::Tensor& tensor, int root) {
  if (!tensor.is_contiguous() || !tensor.device().is_cpu()) {
    throw Error("nano: broadcast: expected a contiguous CPU tensor");
  }
  if (root < 0 || root >= size_) {
    throw Error("nano: broadcast: bad root " + std::to_string(root) + " in a world of " +
                std::to_string(size_));
  }
  // Gloo lacks some dtypes (bool, bfloat16): broadcast the bytes.
  std::vector<at::Tensor> tensors{
      at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())},
                    at::TensorOptions().dtype(at::kByte))};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  GlooWork(group_->broadcast(tensors, opts), nullptr).wait();
}

std::unique_ptr<Work> GlooCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp op) {
  check_reducible(tensor, "all_reduce");
  const int size = size_;
  const bool average = op == ReduceOp::kAverage && size > 1;
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

void GlooCommunicator::barrier() {
  GlooWork(group_->barrier(), nullptr).wait();
}

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
