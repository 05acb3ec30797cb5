#pragma once
// nano's job store: the c10d::Store a job over several hosts meets in when nano-run started it
// (NANO_JOB_SECRET set). Rank 0 hosts a JobStoreServer (runtime/rendezvous/job_store_server.h) on the
// rendezvous port; every rank, rank 0 included, is a client that proves it knows the job's
// secret and checks that the server does too, so neither a stranger's connection nor a
// stranger posing as the store can read or write the keys the ranks exchange (Gloo's
// addresses among them). c10d's TCPStore, which admits anyone who reaches the port, stays the
// store of worlds without a secret (torchrun's, a test's own launcher).
#include <c10/util/intrusive_ptr.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nano {

class JobStoreServer;

class JobStore : public c10d::Store {
 public:
  /// A client of the store at host:port, which the job's `secret` admits. Connects (retrying
  /// while nothing listens yet) within `timeout`, which also bounds every wait. `server`: rank
  /// 0's own server, kept alive as long as this client. Throws Error: the message says whether
  /// nobody answered, the server refused this rank's answer (another job's secret), or the
  /// server could not prove it knows the secret.
  JobStore(std::string host, int port, std::string secret, std::chrono::milliseconds timeout,
           std::shared_ptr<JobStoreServer> server = nullptr);
  ~JobStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
#if TORCH_VERSION_MAJOR >= 2
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  bool hasExtendedApi() const override { return false; }
#endif
  /// A copy a second thread may use: a second connection. Newer libtorch declares this in
  /// c10d::Store (not 2.6), and then this overrides it; hence no `override`.
  c10::intrusive_ptr<c10d::Store> clone();  // NOLINT(modernize-use-override)

  /// "host:port", as messages name the store.
  std::string where() const;

 private:
  struct Endpoint {
    std::string host;
    int port = 0;
    std::string secret;
  };
  struct Link;
  /// Sends `message` and returns the answer, within `bound`; a link that broke or ran out of
  /// time is closed (a late answer would be taken for the next request's) and made anew by
  /// the next request.
  std::vector<std::string> request(const std::vector<std::string>& message, std::chrono::milliseconds bound);
  std::vector<std::string> request_locked(const std::vector<std::string>& message, std::chrono::milliseconds bound);
  /// A new link to the server, admitted through the handshake within `bound`.
  std::unique_ptr<Link> connect(std::chrono::milliseconds bound);

  Endpoint endpoint_;
  std::shared_ptr<JobStoreServer> server_;
  std::unique_ptr<Link> link_;
  std::mutex mutex_;
};

}  // namespace nano
