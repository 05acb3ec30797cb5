// The rank worker's scenarios of the communicator alone (rank_worker.cc runs them): collectives
// against closed forms, a peer that exits, and collectives that do not match.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nano/error.h>
#include <nano/nano.h>
#include "tests/runtime/rank_worker.h"

// The communicators' own classes (not part of the installed surface).
#include "runtime/communicators/gloo_communicator.h"
#include "runtime/communicators/mpi_communicator.h"

namespace nano::test {

// --- collectives: rank-filled all-reduce, broadcast, gather, barrier -------------------------
void scenario_collectives(nano::World& w) {
  auto& comm = *w.comm;
  const int n = w.size(), r = w.rank();
  const double sum = n * (n - 1) / 2.0;
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
    const std::string name = c10::toString(dtype);
    auto t = torch::full({1000}, r, torch::TensorOptions().dtype(dtype));
    comm.all_reduce(t, nano::ReduceOp::kSum);
    check(t.eq(sum).all().item<bool>(), name + " sum != " + str(sum) + " (got " + str(t[0].item<double>()) + ")");
    auto a = torch::full({7}, r + 1, torch::TensorOptions().dtype(dtype));
    comm.all_reduce(a, nano::ReduceOp::kAverage);
    const double avg = (n + 1) / 2.0;
    check(a.eq(avg).all().item<bool>(), name + " average != " + str(avg));
  }
  // Several outstanding asynchronous reductions, waited in reverse order.
  std::vector<torch::Tensor> ts;
  std::vector<std::unique_ptr<nano::Work>> works;
  for (int i = 0; i < 6; ++i) ts.push_back(torch::full({1000 * (i + 1)}, r * (i + 1), torch::kFloat));
  for (auto& t : ts) works.push_back(comm.all_reduce_async(t, nano::ReduceOp::kSum));
  for (int i = 5; i >= 0; --i) {
    works[i]->wait();
    check(ts[i].eq(sum * (i + 1)).all().item<bool>(), "async #" + std::to_string(i) + " wrong");
  }
  // A 6 MB buffer (the multi-chunk path of the transports).
  auto big = torch::full({1536 * 1024}, r, torch::kFloat);
  comm.all_reduce(big);
  check(big.eq(sum).all().item<bool>(), "6 MB all-reduce wrong");
  // Broadcast from every root, including an int64 tensor.
  for (int root = 0; root < n; ++root) {
    auto b = torch::full({5}, r * 10 + 1, torch::kLong);
    comm.broadcast(b, root);
    check(b.eq(root * 10 + 1).all().item<bool>(), "broadcast from root " + std::to_string(root));
  }
  auto g = comm.gather({double(r), r * 0.5});
  if (r == 0) {
    check(g.size() == size_t(2 * n), "gather size " + std::to_string(g.size()));
    for (int i = 0; i < n && g.size() == size_t(2 * n); ++i) {
      check(g[2 * i] == i && g[2 * i + 1] == i * 0.5, "gather value of rank " + std::to_string(i));
    }
  } else {
    check(g.empty(), "gather result on rank > 0 not empty");
  }
  comm.barrier();
  bool threw = false;
  try {
    auto bad = torch::zeros({3}, torch::kInt);
    comm.all_reduce(bad);
  } catch (const nano::Error& e) {
    threw = std::string(e.what()) ==
            "nano: all_reduce: unsupported tensor (Int): expected a contiguous CPU tensor of "
            "Float, Double or BFloat16";
    if (!threw) std::cout << "unexpected message: " << e.what() << std::endl;
  }
  check(threw, "int all-reduce did not throw the expected nano::Error");
  if (auto* gloo = dynamic_cast<nano::GlooCommunicator*>(&comm)) {
    std::cout << "transport: " << (gloo->uses_shared_memory() ? "shared memory" : "gloo") << std::endl;
  }
  if (auto* mpi = dynamic_cast<nano::MpiCommunicator*>(&comm)) {
    std::cout << "transport: " << (mpi->uses_shared_memory() ? "shared memory" : "mpi") << std::endl;
  }
}

// --- peer-exits: rank 1 dies without a word; rank 0's shared-memory all-reduce must fail ----
void scenario_peer_exits(nano::World& w) {
  auto* gloo = dynamic_cast<nano::GlooCommunicator*>(w.comm.get());
  check(gloo && gloo->uses_shared_memory(), "expected the Gloo communicator on shared memory");
  w.comm->barrier();
  if (w.rank() != 0) {
    std::cout << "OK peer-exits rank " << w.rank() << " of " << w.size() << " (gloo)" << std::endl;
    std::_Exit(0);  // no destructors, no goodbye: as if killed
  }
  auto big = torch::ones({1 << 20}, torch::kFloat);
  std::string message;
  try {
    w.comm->all_reduce(big);
  } catch (const nano::Error& e) {
    message = e.what();
  }
  // It left after its last collective: said so, with the one this rank waited in.
  check(message.rfind("nano: rank 1 (pid ", 0) == 0 && message.find(") exited ") != std::string::npos &&
            message.find(" while this rank waited in all_reduce(float32[1048576], SUM) #") != std::string::npos,
        "expected the peer's exit to be reported, got '" + message + "'");
}

// --- mismatch: the ranks call collectives that do not match; both must fail -----------------
// with the line naming both calls, keep their own values, and fail the next collective at once.
//   mismatch        all-reduces of 100000 and 50000 floats (shared memory's path when it is on)
//   mismatch-small  all-reduces of 4 and 2 floats (MPI's own path below 16 KiB)
//   mismatch-root   broadcasts of 4 floats from root 0 and from root 1
void scenario_mismatch(nano::World& w, const std::string& kind) {
  const bool root = kind == "mismatch-root";
  const int64_t n0 = kind == "mismatch-small" ? 4 : root ? 4 : 100000;
  const int64_t n1 = kind == "mismatch-small" ? 2 : root ? 4 : 50000;
  auto mine = torch::full({w.rank() == 0 ? n0 : n1}, float(w.rank() + 1), torch::kFloat);
  std::string message;
  try {
    if (root) {
      w.comm->broadcast(mine, w.rank());
    } else {
      w.comm->all_reduce(mine);
    }
  } catch (const nano::Error& e) {
    message = e.what();
  }
  const std::string expected =
      root ? "does not match: rank 0 called broadcast(float32[4], root 0), rank 1 called broadcast(float32[4], root 1)"
           : "does not match: rank 0 called all_reduce(float32[" + std::to_string(n0) +
                 "], SUM), rank 1 called all_reduce(float32[" + std::to_string(n1) + "], SUM)";
  check(message.rfind("nano: collective #", 0) == 0 && message.find(expected) != std::string::npos,
        "expected the mismatch named, got '" + message + "'");
  check(mine[0].item<float>() == float(w.rank() + 1), "a rank's tensor changed in a collective that did not match");
  std::string again;
  auto next = torch::ones({100000}, torch::kFloat);
  try {
    w.comm->all_reduce(next);
  } catch (const nano::Error& e) {
    again = e.what();
  }
  check(again == message + " (the group is broken since)", "the next collective said '" + again + "'");
  std::cout << kind << ": " << message << std::endl;
}

}  // namespace nano::test
