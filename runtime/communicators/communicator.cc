#include <nano/communicator.h>

#include <ATen/ATen.h>

#include <cstdlib>

#include <nano/error.h>

#include "runtime/collectives/shm_rendezvous.h"
#include "runtime/communicators/gloo_communicator.h"
#include "runtime/communicators/mpi_communicator.h"

namespace nano {

void check_broadcastable(const at::Tensor& tensor, int root, int world_size) {
  if (!tensor.is_contiguous() || !tensor.device().is_cpu()) {
    throw Error("nano: broadcast: expected a contiguous CPU tensor");
  }
  if (root < 0 || root >= world_size) {
    throw Error("nano: broadcast: bad root " + std::to_string(root) + " in a world of " + std::to_string(world_size));
  }
}

void check_reducible(const at::Tensor& tensor, const char* what) {
  const auto type = tensor.scalar_type();
  const bool dtype_ok = type == at::kFloat || type == at::kDouble || type == at::kBFloat16;
  if (!tensor.defined() || !dtype_ok || !tensor.is_contiguous() || !tensor.device().is_cpu()) {
    std::string desc = !tensor.defined()
                           ? std::string("undefined")
                           : std::string(c10::toString(type)) + (tensor.is_contiguous() ? "" : ", non-contiguous") +
                                 (tensor.device().is_cpu() ? "" : ", not on CPU");
    throw Error(std::string("nano: ") + what + ": unsupported tensor (" + desc +
                "): expected a contiguous CPU tensor of Float, Double or BFloat16");
  }
}

void SelfCommunicator::broadcast(at::Tensor& /*tensor*/, int root) {
  if (root != 0) throw Error("nano: broadcast: bad root " + std::to_string(root) + " in a world of 1");
}

namespace {
class DoneWork : public Work {
 public:
  void wait() override {}
};
}  // namespace

std::unique_ptr<Work> SelfCommunicator::all_reduce_async(at::Tensor& tensor, ReduceOp /*op*/) {
  check_reducible(tensor, "all_reduce");
  return std::make_unique<DoneWork>();
}

std::shared_ptr<Communicator> make_communicator(const Context& context) {
  const std::size_t shm_bytes = shm_bytes_from_environment();
  switch (context.backend) {
    case CommBackend::kMpi: return std::make_shared<MpiCommunicator>(context, shm_bytes);
    case CommBackend::kGloo: return std::make_shared<GlooCommunicator>(context, shm_bytes);
    case CommBackend::kSelf:
    case CommBackend::kAuto: break;
  }
  return std::make_shared<SelfCommunicator>();
}

}  // namespace nano
