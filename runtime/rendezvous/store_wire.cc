#include "runtime/rendezvous/store_wire.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <nano/error.h>

namespace nano {
namespace {

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

uint32_t get_u32(const std::string& in, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

StoreMessage ok(std::vector<std::string> fields = {}) {
  StoreMessage m{"ok"};
  m.insert(m.end(), fields.begin(), fields.end());
  return m;
}

StoreMessage error(const std::string& what) { return {"error", what}; }

// A number as c10d's add writes it: strtoll's syntax, all of `text` (no byte after it, not even
// a NUL inside), within int64 (strtoll would clamp a longer one to its limit without a word).
enum class Int64Text { kNumber, kNotANumber, kOutOfRange };

Int64Text parse_int64(const std::string& text, long long& value) {
  char* end = nullptr;
  errno = 0;
  value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || end != text.c_str() + text.size()) return Int64Text::kNotANumber;
  return errno == ERANGE ? Int64Text::kOutOfRange : Int64Text::kNumber;
}

// add's answer: the key's number plus `delta`, or an error naming what was wrong.
StoreMessage add(std::map<std::string, std::string>& values, const std::string& key, const std::string& delta_text) {
  long long delta = 0, value = 0;
  switch (parse_int64(delta_text, delta)) {
    case Int64Text::kNotANumber: return error("add: '" + delta_text + "' is not a number");
    case Int64Text::kOutOfRange: return error("add: '" + delta_text + "' is beyond int64");
    case Int64Text::kNumber: break;
  }
  auto it = values.find(key);
  if (it != values.end()) {
    switch (parse_int64(it->second, value)) {
      case Int64Text::kNotANumber: return error("add: key '" + key + "' holds no number");
      case Int64Text::kOutOfRange: return error("add: key '" + key + "' holds a number beyond int64");
      case Int64Text::kNumber: break;
    }
  }
  long long sum = 0;
  if (__builtin_add_overflow(value, delta, &sum))
    return error("add: key '" + key + "' holds " + std::to_string(value) + ": adding " + std::to_string(delta) +
                 " overflows int64");
  values[key] = std::to_string(sum);
  return ok({std::to_string(sum)});
}

}  // namespace

std::string encode_store_message(const StoreMessage& message) {
  std::string body;
  for (const auto& field : message) {
    put_u32(body, static_cast<uint32_t>(field.size()));
    body += field;
  }
  std::string frame;
  put_u32(frame, static_cast<uint32_t>(body.size()));
  return frame + body;
}

std::optional<StoreMessage> StoreMessageReader::next() {
  if (buffer_.size() < 4) return std::nullopt;
  const size_t length = get_u32(buffer_, 0);
  if (length > max_frame_)
    throw Error("a frame of " + std::to_string(length) + " bytes (at most " + std::to_string(max_frame_) +
                " are taken)");
  if (buffer_.size() < 4 + length) return std::nullopt;
  StoreMessage message;
  size_t at = 4;
  const size_t end = 4 + length;
  while (at < end) {
    if (end - at < 4) throw Error("a field's length cut short");
    const size_t size = get_u32(buffer_, at);
    at += 4;
    if (size > end - at) throw Error("a field longer than its frame");
    message.emplace_back(buffer_, at, size);
    at += size;
  }
  buffer_.erase(0, end);
  return message;
}

bool StoreState::has_all(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return values_.count(k) > 0; });
}

std::optional<StoreMessage> StoreState::answer(int client, const StoreMessage& request) {
  if (request.empty()) return error("an empty request");
  const std::string& op = request[0];
  const size_t args = request.size() - 1;
  const auto key = [&]() -> const std::string& { return request[1]; };
  if (op == "set" && args == 2) {
    values_[key()] = request[2];
    return ok();
  }
  if (op == "append" && args == 2) {
    values_[key()] += request[2];
    return ok();
  }
  if (op == "get" && args == 1) {
    auto it = values_.find(key());
    if (it == values_.end()) return StoreMessage{"missing"};
    return ok({it->second});
  }
  if (op == "add" && args == 2) return add(values_, key(), request[2]);
  if (op == "cas" && args == 3) {
    // c10d's compareSet: a missing key is set when the expected value is empty; otherwise the
    // caller gets back its expected value (TCPStore's answer) and nothing changes.
    auto it = values_.find(key());
    if (it == values_.end()) {
      if (!request[2].empty()) return ok({request[2]});
      values_[key()] = request[3];
      return ok({request[3]});
    }
    if (it->second == request[2]) it->second = request[3];
    return ok({it->second});
  }
  if (op == "delete" && args == 1) return ok({values_.erase(key()) ? "1" : "0"});
  if (op == "count" && args == 0) return ok({std::to_string(values_.size())});
  if (op == "check") return ok({has_all({request.begin() + 1, request.end()}) ? "1" : "0"});
  if (op == "wait") {
    std::vector<std::string> keys(request.begin() + 1, request.end());
    if (has_all(keys)) return ok();
    waits_.push_back({client, std::move(keys)});
    return std::nullopt;
  }
  return error("unknown request '" + op + "' with " + std::to_string(args) + " arguments");
}

std::vector<std::pair<int, StoreMessage>> StoreState::take_ready() {
  std::vector<std::pair<int, StoreMessage>> ready;
  auto it = waits_.begin();
  while (it != waits_.end()) {
    if (has_all(it->keys)) {
      ready.emplace_back(it->client, ok());
      it = waits_.erase(it);
    } else {
      ++it;
    }
  }
  return ready;
}

void StoreState::forget(int client) {
  waits_.erase(std::remove_if(waits_.begin(), waits_.end(), [&](const Wait& w) { return w.client == client; }),
               waits_.end());
}

}  // namespace nano
