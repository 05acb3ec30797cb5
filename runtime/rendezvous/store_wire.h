#pragma once
// The wire of nano's job store (runtime/rendezvous/job_store.h): a message is a list of byte strings (an
// operation or status first, then its arguments), sent as one frame, a 4-byte little-endian
// length and then each field as a 4-byte little-endian length and its bytes. Pure: the codec
// and the store's state machine live apart from the sockets that carry them, so both are
// table-tested without a network.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nano {

using StoreMessage = std::vector<std::string>;

/// Pure: `message` as one frame.
std::string encode_store_message(const StoreMessage& message);

/// Reassembles messages from the bytes of a stream, refusing any frame over a bound.
class StoreMessageReader {
 public:
  /// `max_frame`: the largest frame accepted; a longer one is a stranger's or a broken peer's.
  explicit StoreMessageReader(size_t max_frame) : max_frame_(max_frame) {}
  void set_max_frame(size_t max_frame) { max_frame_ = max_frame; }
  void feed(const char* data, size_t size) { buffer_.append(data, size); }
  /// The next whole message; nullopt when none is whole yet. Throws Error for a frame over the
  /// bound or fields that do not fill their frame exactly.
  std::optional<StoreMessage> next();
  /// Bytes received and not taken yet.
  size_t pending() const { return buffer_.size(); }

 private:
  size_t max_frame_;
  std::string buffer_;
};

/// The keys and values of a store, and the requests of its clients as the server answers them.
/// Pure: the server feeds it each authenticated client's requests and sends what it answers.
class StoreState {
 public:
  /// The answer to `request` from client `client`; nullopt when it waits for keys that are not
  /// there yet ("wait"): answered later through take_ready().
  std::optional<StoreMessage> answer(int client, const StoreMessage& request);
  /// The waits of clients whose keys have all come since: (client, answer) pairs, in order.
  std::vector<std::pair<int, StoreMessage>> take_ready();
  /// Client `client` is gone: its waits go too.
  void forget(int client);
  size_t size() const { return values_.size(); }

 private:
  struct Wait {
    int client;
    std::vector<std::string> keys;
  };
  bool has_all(const std::vector<std::string>& keys) const;

  std::map<std::string, std::string> values_;
  std::vector<Wait> waits_;
};

}  // namespace nano
