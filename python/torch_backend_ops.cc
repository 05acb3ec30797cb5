// The nano torch backend's c10d::Backend operations: each checks its arguments on the
// caller's thread and enqueues its work for the backend's thread (torch_backend_now.cc).
#include "python/torch_backend.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include <nano/error.h>
#include "python/nano_work.h"
#include "python/torch_backend_checks.h"
#include "runtime/timeline/step_report.h"

namespace nano {

using namespace torch_backend_detail;

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
