// The nano torch backend's collectives as its thread runs them (the *_now and *_across
// functions): shared memory on one host, then the Gloo path across hosts.
#include "python/torch_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include <nano/error.h>
#include "python/nano_work.h"
#include "python/torch_backend_checks.h"
#include "runtime/collectives/host_layout.h"

#include "runtime/collectives/serial_executor.h"
#include "runtime/collectives/shm_collectives.h"

namespace nano {

using namespace torch_backend_detail;

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

}  // namespace nano
