#pragma once
// The one decision every communicator of nano makes for each collective: through shared memory
// when every rank of the world maps it (ShmCollectives: one sequence of signed calls), else
// through the peer library (MPI or Gloo) after every rank's signature was compared, so that
// mismatched calls fail on every rank naming the difference instead of moving data. The MPI and
// Gloo communicators and the torch backend route through it; which thread runs what stays theirs.
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include <nano/communicator.h>

#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/timeline/recorder.h"

namespace nano {

/// An asynchronous collective whose span (issued until the rank's wait() returned) goes to the
/// timeline.
class TimedWork : public Work {
 public:
  TimedWork(std::unique_ptr<Work> inner, int64_t start, const CollectiveSignature& call)
      : inner_(std::move(inner)), start_(start), call_(call) {}
  void wait() override {
    inner_->wait();
    if (start_) timeline::collective_since(start_, payload_bytes(call_), describe(call_));
    start_ = 0;
  }

 private:
  std::unique_ptr<Work> inner_;
  int64_t start_;
  CollectiveSignature call_;
};

class CollectiveRoute {
 public:
  /// A world of one: every call takes the peer path, unchecked.
  CollectiveRoute() = default;
  /// `shm`: the world's shared-memory collectives, not owned (null when some rank cannot map
  /// them, or shared memory is off). `peer_check`: how a call's signature is compared over the
  /// peer library where there is no shared memory (null for a world of one).
  CollectiveRoute(ShmCollectives* shm, std::shared_ptr<CallCheck> peer_check)
      : shm_(shm), peer_check_(shm ? nullptr : std::move(peer_check)) {}

  /// Whether every rank maps the shared memory.
  bool shared() const { return shm_ != nullptr; }

  /// Before data goes through the peer library: every rank's signature compared, in the shared
  /// area where there is one (the same numbered sequence as its collectives), else with one small
  /// all-gather of the peer library. Throws nano::Error naming the mismatch, on every rank.
  void agree(const CollectiveSignature& call) const {
    if (shm_) {
      shm_->agree_on(call);
    } else if (peer_check_) {
      peer_check_->agree(call);
    }
  }

  /// Runs `call`: `on_shm(ShmCollectives&)` when the world has shared memory and `shm_serves`
  /// (the operation has a shared-memory form worth taking at its size), else run_on_peer().
  /// Under `nano-run --timeline`, the call's span is recorded: until it returns, or for an
  /// asynchronous one (a Work) until the rank's wait() for it returns.
  template <class OnShm, class OnPeer>
  auto run(const CollectiveSignature& call, bool shm_serves, OnShm on_shm, OnPeer on_peer) const {
    return timed(call, [&] {
      if (shm_ && shm_serves) return on_shm(*shm_);
      return checked(call, on_peer);
    });
  }

  /// Runs `call` through the peer library, an operation shared memory does not carry:
  /// `on_peer()` after agree(). A failure of the peer path breaks the group: its calls are out of
  /// step after it.
  template <class OnPeer>
  auto run_on_peer(const CollectiveSignature& call, OnPeer on_peer) const {
    return timed(call, [&] { return checked(call, on_peer); });
  }

 private:
  template <class OnPeer>
  auto checked(const CollectiveSignature& call, OnPeer on_peer) const {
    agree(call);
    if (!peer_check_) return on_peer();
    try {
      return on_peer();
    } catch (const std::exception& e) {
      peer_check_->fail(e.what());
      throw;
    }
  }

  // `f()`, its span told to the timeline when one is recorded.
  template <class F>
  static auto timed(const CollectiveSignature& call, F f) {
    const int64_t start = timeline::now_ns();
    using Result = decltype(f());
    if constexpr (std::is_void_v<Result>) {
      f();
      if (start) timeline::collective_since(start, payload_bytes(call), describe(call));
    } else if constexpr (std::is_same_v<Result, std::unique_ptr<Work>>) {
      std::unique_ptr<Work> work = f();
      if (!start) return work;
      return std::unique_ptr<Work>(std::make_unique<TimedWork>(std::move(work), start, call));
    } else {
      Result result = f();
      if (start) timeline::collective_since(start, payload_bytes(call), describe(call));
      return result;
    }
  }

  ShmCollectives* shm_ = nullptr;
  std::shared_ptr<CallCheck> peer_check_;
};

}  // namespace nano
