#pragma once
// The rendezvous of a world through a c10d store: every rank announces itself and waits for all
// others, so a rank that never arrives is named instead of being waited on forever. The Gloo
// communicator keeps the store for its connections; the MPI communicator uses it only to bound
// and explain its start (MPI_Init itself has no timeout and cannot say who is missing).
//
// Which store: a job of nano-run (NANO_JOB_ID) whose ranks all run on one host meets in a
// c10d::FileStore in /dev/shm, among the job's files, so that nothing listens on the network; any
// other world through a c10d::TCPStore that rank 0 hosts on MASTER_ADDR:MASTER_PORT.
#include <c10/util/intrusive_ptr.h>

#include <string>
#include <vector>

#include <nano/context.h>

namespace c10d {
class Store;
}  // namespace c10d

namespace nano {

/// The file of a one-host job's store ("<job_dir>/store-<prefix, '/' as '-'>", in the job's own
/// 0700 folder NANO_JOB_DIR, which the launcher makes and removes), or "" when the world must meet
/// over TCP: no job folder (not launched by nano's launcher), or ranks on several hosts. Pure.
std::string file_store_path(const std::string& job_dir, const Context& context, const std::string& prefix);

/// Throws Error naming `dir` unless it is a folder (not a link) of this user that nobody else may
/// enter: the job's folder, where its one-host store lives, must be nobody else's.
void check_private_job_dir(const std::string& dir);

/// Every rank sets "<prefix><rank>" and waits for all others, in the store file_store_path()
/// names, else in rank 0's TCP store. After context.rendezvous_timeout, throws nano::Error
/// naming where and the missing ranks, e.g.
/// "nano: rendezvous at 127.0.0.1:29500 timed out after 2 s: 1 of 2 ranks did not join
/// (missing: 1)"; a rank > 0 that cannot reach the store says "...: the store host (rank 0)
/// did not answer"; rank 0 that cannot listen says "nano: cannot host the rendezvous store on
/// ADDR:PORT: REASON".
c10::intrusive_ptr<c10d::Store> rendezvous(const Context& context, const std::string& prefix);

/// The context a store needs, for a process that has no nano::Context (a stock PyTorch rank on
/// the nano backend): `rank` of `size`, LOCAL_WORLD_SIZE (else `size`), MASTER_ADDR (else
/// 127.0.0.1) and MASTER_PORT from the environment, and `timeout` as the rendezvous's bound.
/// Throws Error when MASTER_PORT is missing or no port.
Context store_context_from_environment(int rank, int size, std::chrono::milliseconds timeout);

/// Pure: the rendezvous-timeout message for `missing` ranks out of `world_size`, at `where`
/// ("127.0.0.1:29500", or a store file).
std::string rendezvous_timeout_message(const std::string& where, double seconds, const std::vector<int>& missing,
                                       int world_size);

/// The first line of `text` (c10d's messages carry C++ stack traces after it).
std::string first_line(const std::string& text);

}  // namespace nano
