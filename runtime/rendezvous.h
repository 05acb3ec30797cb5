#pragma once
// The rendezvous of a world through a c10d::TCPStore that rank 0 hosts on
// MASTER_ADDR:MASTER_PORT: every rank announces itself and waits for all others, so a rank
// that never arrives is named instead of being waited on forever. The Gloo communicator keeps
// the store for its connections; the MPI communicator uses it only to bound and explain its
// start (MPI_Init itself has no timeout and cannot say who is missing).
#include <c10/util/intrusive_ptr.h>

#include <string>
#include <vector>

#include <nano/context.h>

namespace c10d {
class TCPStore;
}  // namespace c10d

namespace nano {

/// Rank 0 hosts the store, every rank sets "<prefix><rank>" and waits for all others. After
/// context.rendezvous_timeout, throws nano::Error naming the address and the missing ranks, e.g.
/// "nano: rendezvous at 127.0.0.1:29500 timed out after 2 s: 1 of 2 ranks did not join
/// (missing: 1)"; a rank > 0 that cannot reach the store says "...: the store host (rank 0)
/// did not answer"; rank 0 that cannot listen says "nano: cannot host the rendezvous store on
/// ADDR:PORT: REASON".
c10::intrusive_ptr<c10d::TCPStore> rendezvous(const Context& context, const std::string& prefix);

/// Pure: the rendezvous-timeout message for `missing` ranks out of `world_size`.
std::string rendezvous_timeout_message(const std::string& address, int port, double seconds,
                                       const std::vector<int>& missing, int world_size);

/// The first line of `text` (c10d's messages carry C++ stack traces after it).
std::string first_line(const std::string& text);

}  // namespace nano
