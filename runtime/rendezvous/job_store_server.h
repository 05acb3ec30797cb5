#pragma once
// The listener of nano's job store: rank 0 of a job over several hosts hosts it, on the
// rendezvous port, in a thread of its own. Unlike c10d's TCPStore, it admits a connection only
// once the peer proved it knows the job's secret (core/job_secret.h): every connection is first
// sent a challenge, and one that does not answer it right, or not within a bound, is closed
// with nothing read from it but the answer. Strangers are bounded in number too (the oldest
// goes when one more arrives), so no flood of connections can exhaust the server's descriptors
// or keep a rank out.
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nano {

/// The first message of the store's handshake, with the server's challenge after it.
inline constexpr const char* kStoreGreeting = "nano-store/1";
/// The purposes of the two answers (answer_challenge): the client's, then the server's.
inline constexpr const char* kStoreClientProof = "store-client";
inline constexpr const char* kStoreServerProof = "store-server";

/// How much the server takes from peers that have not proved they belong to the job.
struct StoreServerLimits {
  /// Connections still to answer the challenge at one time; one more closes the oldest.
  size_t max_strangers = 64;
  /// How long a connection has to answer the challenge (a rank answers within milliseconds).
  std::chrono::milliseconds answer_within{10000};
  /// The largest frame taken before the answer (the answer is a few dozen bytes).
  size_t max_frame_before_answer = 256;
  /// The largest frame a member may send (a store holds addresses and small objects).
  size_t max_frame = size_t{1} << 30;
};

/// What happened to the connections the server took, for reports and tests.
struct StoreServerCounts {
  size_t members = 0;  ///< connections that answered the challenge right
  size_t wrong = 0;    ///< closed: a wrong answer or bytes that are no answer
  size_t late = 0;     ///< closed: no answer within answer_within
  size_t crowded = 0;  ///< closed: the oldest stranger when one more arrived
};

class JobStoreServer {
 public:
  /// Listens on every interface at `port` (IPv4) and serves from a thread of its own until
  /// destroyed. Throws Error naming the port and why when it cannot listen.
  JobStoreServer(int port, std::string secret, StoreServerLimits limits = {});
  ~JobStoreServer();
  JobStoreServer(const JobStoreServer&) = delete;
  JobStoreServer& operator=(const JobStoreServer&) = delete;

  int port() const { return port_; }
  StoreServerCounts counts() const;

 private:
  struct Connection;
  void serve();
  void accept_all();
  bool admit(Connection& c, const std::vector<std::string>& message);
  void take(Connection& c);
  void answer(Connection& c, const std::vector<std::string>& request);
  void send(Connection& c, const std::vector<std::string>& message);
  void flush(Connection& c);
  void close_connection(Connection& c);
  void close_late_and_crowded();
  void count(size_t StoreServerCounts::*which);

  std::string secret_;
  StoreServerLimits limits_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Connection>> connections_;
  int next_id_ = 0;
  struct State;
  std::unique_ptr<State> state_;
  mutable std::mutex counts_mutex_;
  StoreServerCounts counts_;
  std::thread thread_;
};

}  // namespace nano
