#include "runtime/collectives/wire_ring.h"

#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "runtime/collectives/serial_executor.h"

namespace nano {

namespace {

// A contiguous tensor's bytes, as Gloo's send and recv take them (they accept no bfloat16).
at::Tensor bytes_of(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())},
                       at::TensorOptions().dtype(at::kByte));
}

}  // namespace

void ring_sum_16bit(C10dGroup& group, at::Tensor& tensor, const WaitForWork& wait) {
  const int n = group.getSize(), me = group.getRank();
  const int64_t count = tensor.numel();
  if (n < 2 || count == 0) return;
  at::Tensor flat = tensor.view({-1});
  // Segment k of n: contiguous, sizes differing by at most one (k taken modulo n).
  auto segment = [&](int k) {
    k = ((k % n) + n) % n;
    const int64_t first = count * k / n;
    return std::pair<int64_t, int64_t>{first, count * (k + 1) / n - first};
  };
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  // Sends `out` to the next rank while receiving `in` from the previous one. The two are the same
  // segment on either side of a hop, so both skip an empty one.
  auto hop = [&](const at::Tensor& out, const at::Tensor& in, int tag) {
    if (out.numel() == 0 && in.numel() == 0) return;
    std::vector<at::Tensor> sent{bytes_of(out)}, got{bytes_of(in)};
    const auto send = out.numel() ? group.send(sent, next, tag) : c10::intrusive_ptr<c10d::Work>();
    const auto recv = in.numel() ? group.recv(got, prev, tag) : c10::intrusive_ptr<c10d::Work>();
    if (send) wait(send, "send");
    if (recv) wait(recv, "recv");
  };
  at::Tensor sums = flat.to(at::kFloat);
  const int64_t widest = (count + n - 1) / n;
  at::Tensor outgoing = at::empty({widest}, tensor.options()), incoming = at::empty({widest}, tensor.options());
  for (int step = 0; step < n - 1; ++step) {
    const auto [send_at, send_length] = segment(me - step);
    const auto [recv_at, recv_length] = segment(me - step - 1);
    at::Tensor out = outgoing.narrow(0, 0, send_length), in = incoming.narrow(0, 0, recv_length);
    out.copy_(sums.narrow(0, send_at, send_length));
    hop(out, in, step);
    sums.narrow(0, recv_at, recv_length).add_(in);
  }
  // This rank's finished segment, rounded once; then every finished segment goes round.
  const auto [own_at, own_length] = segment(me + 1);
  flat.narrow(0, own_at, own_length).copy_(sums.narrow(0, own_at, own_length));
  for (int step = 0; step < n - 1; ++step) {
    const auto [send_at, send_length] = segment(me + 1 - step);
    const auto [recv_at, recv_length] = segment(me - step);
    hop(flat.narrow(0, send_at, send_length), flat.narrow(0, recv_at, recv_length), n + step);
  }
}

std::function<void()> start_gloo_sum(C10dGroup& group, at::Tensor tensor, bool ring, SerialExecutor* ring_thread,
                                     WaitForWork wait) {
  if (!ring) {
    std::vector<at::Tensor> tensors{tensor};
    return [wait = std::move(wait), work = group.allreduce(tensors)] { wait(work, "all_reduce"); };
  }
  auto sum = [&group, tensor, wait = std::move(wait)]() mutable { ring_sum_16bit(group, tensor, wait); };
  if (ring_thread == nullptr) {
    sum();
    return [] {};
  }
  std::shared_ptr<Completion> done = ring_thread->submit(std::move(sum));
  return [done] { done->wait(); };
}

}  // namespace nano
