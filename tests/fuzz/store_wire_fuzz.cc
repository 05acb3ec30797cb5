// The job store's wire and state (runtime/rendezvous/store_wire.h) on any bytes: the message
// reader as the server meets a connection (a small bound before the answer, then the members'),
// and the store answering what it reads, request after request, from three clients.
//
// Input: a byte that sets the chunk size, the reader's bound and the clients, then the bytes of
// one connection, or (odd first byte) requests as text lines of space-separated fields, so the
// fuzzer explores the store's state without having to find the framing first.
#include <algorithm>
#include <sstream>

#include <nano/error.h>
#include "runtime/rendezvous/store_wire.h"
#include "tests/fuzz/fuzz_target.h"

using namespace nano;

namespace {

const char* const kOperations[] = {"set", "append", "get", "add", "cas", "delete", "count", "check", "wait"};

void serve(StoreState& store, int client, const StoreMessage& request) {
  const std::optional<StoreMessage> reply = store.answer(client, request);
  if (reply) {
    NANO_FUZZ_CHECK(!reply->empty());
    const std::string& status = (*reply)[0];
    NANO_FUZZ_CHECK(status == "ok" || status == "error" || status == "missing");
    if (status == "error") NANO_FUZZ_CHECK(reply->size() == 2 && !(*reply)[1].empty());
    const bool known = std::find(std::begin(kOperations), std::end(kOperations), request.empty() ? "" : request[0]) !=
                       std::end(kOperations);
    if (!known) NANO_FUZZ_CHECK(status == "error");
  } else {
    NANO_FUZZ_CHECK(!request.empty() && request[0] == "wait");
  }
  // What the store now holds answers as it should.
  if (reply && (*reply)[0] == "ok" && request.size() == 3 && request[0] == "add") {
    const StoreMessage got = *store.answer(client, {"get", request[1]});
    NANO_FUZZ_CHECK(got.size() == 2 && got[1] == (*reply)[1]);
  }
  if (reply && request.size() == 3 && request[0] == "set")
    NANO_FUZZ_CHECK(*store.answer(client, {"get", request[1]}) == (StoreMessage{"ok", request[2]}));
  NANO_FUZZ_CHECK(*store.answer(client, {"count"}) == (StoreMessage{"ok", std::to_string(store.size())}));
  for (const auto& [waiter, answer] : store.take_ready()) NANO_FUZZ_CHECK(answer == StoreMessage{"ok"});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t knobs = data[0];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  StoreState store;
  int client = 0;
  if (knobs & 1) {
    std::istringstream lines(bytes);
    for (std::string line; std::getline(lines, line);) {
      StoreMessage request;
      std::istringstream fields(line);
      for (std::string field; std::getline(fields, field, ' ');) request.push_back(field);
      serve(store, client, request);
      client = (client + 1) % 3;
      if (knobs & 2 && client == 0) store.forget(1);
    }
    return 0;
  }
  // As the server reads a connection: at most 256 bytes a frame until the answer (its first
  // message), then the members' bound (smaller here: the fuzzer's inputs are small anyway).
  const size_t chunk = (knobs >> 2) % 29 + 1;
  StoreMessageReader reader(256);
  std::string taken;
  bool admitted = false, closed = false;
  try {
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      reader.feed(bytes.data() + at, std::min(chunk, bytes.size() - at));
      while (auto message = reader.next()) {
        taken += encode_store_message(*message);
        if (!admitted) {
          admitted = true;
          reader.set_max_frame(size_t{1} << 20);
          continue;
        }
        serve(store, client, *message);
        client = (client + 1) % 3;
      }
    }
  } catch (const Error&) {
    closed = true;  // a frame over the bound, or fields that do not fill their frame
  }
  // Messages come back as they were sent; what was not taken waits whole.
  NANO_FUZZ_CHECK(bytes.compare(0, taken.size(), taken) == 0);
  if (!closed) NANO_FUZZ_CHECK(reader.pending() == bytes.size() - taken.size());
  return 0;
}

std::vector<std::string> nano_fuzz_seeds() {
  // A member's connection as JobStore sends it: the handshake's answer, then c10d's requests.
  std::string wire(1, '\x00');
  for (const StoreMessage& m : std::vector<StoreMessage>{
           {std::string(32, '\x11'), std::string(16, '\x22')},
           {"count"},
           {"set", "gloo/rank_0",
            std::string("\x00\x01\x02"
                        "addr",
                        7)},
           {"add", "barrier", "1"},
           {"add", "barrier", "-9223372036854775808"},
           {"cas", "leader", "", "0"},
           {"wait", "gloo/rank_0", "gloo/rank_1"},
           {"check", "gloo/rank_1"},
           {"append", "log", "x"},
           {"get", "gloo/rank_0"},
           {"delete", "leader"},
       })
    wire += encode_store_message(m);
  return {
      wire,
      std::string(1, '\x01') +
          "set a 1\nadd a 9223372036854775806\nadd a 1\nwait b c\nset b 2\nappend c x\ncas d  5\nget a\ncheck a b\n"
          "delete a\ncount\n",
      std::string(1, '\x03') + "wait k\nwait k j\nadd k -1\nset j 1\nshout\n\nadd n 99999999999999999999\n",
      std::string(1, '\x04') + encode_store_message({std::string(300, 'x')}),
  };
}
