#pragma once
// What the MPI and the Gloo communicator share: a place in a world of peers, fixed when the
// communicator connects, and an optional shared-memory path among the ranks of one host.
#include <nano/communicator.h>

namespace nano {

class PeerCommunicator : public Communicator {
 public:
  int rank() const final { return rank_; }
  int size() const final { return size_; }
  /// True when the ranks share memory: the Gloo communicator's collectives all go through it,
  /// the MPI communicator's all-reduces from ShmCollectives::kMinBytes up; either way every
  /// call's signature is compared there.
  virtual bool uses_shared_memory() const = 0;

 protected:
  int rank_ = 0;  ///< set by the constructor of a derived class, once connected
  int size_ = 1;
};

}  // namespace nano
