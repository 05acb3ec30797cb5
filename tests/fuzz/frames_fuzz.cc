// The rank shim's link (launcher/process/frames.h) as nano-run reads it, on any bytes: the frame decoder
// and every payload parser, then nano-run's state for the links (ShimChannels) twice: a stranger's
// connection, which must never link a rank, and a shim's after a right hello, whose frames
// (output, exit, started, timeline, error file) come from the input.
//
// Input: a byte that sets the chunk size and the rank, then the link's bytes.
#include <sys/types.h>

#include <algorithm>
#include <climits>

#include <nano/error.h>
#include "core/parse.h"
#include "launcher/prepare/port.h"
#include "launcher/process/frames.h"
#include "launcher/process/output.h"
#include "launcher/supervise/shim_channels.h"
#include "launcher/supervise/supervision_io.h"
#include "launcher/timeline/timeline_shipping.h"
#include "tests/fuzz/fuzz_target.h"

namespace nano {

// launcher/prepare/port.h's, which ShimChannels names its hosts with. Defined here rather than linking
// port.cc, whose sockets and listen guard would bring half the launcher into the fuzzer.
std::string host_name() { return "hostA"; }

}  // namespace nano

using namespace nano;

namespace {

constexpr int kWorld = 4;
const std::string kSecret(64, '7');

struct NullSink : OutputSink {
  void write(Stream, const std::string&) override {}
};

struct NoEvents : ShimEvents {
  void rank_started_here(int, const GroupLeader&) override {}
  void rank_ended(int, int, int) override {}
};

// The system as ShimChannels sees it: frames it sends are kept (the challenge), nothing else happens.
class LinkIo : public SupervisionIo {
 public:
  std::string sent;
  void catch_signals() override {}
  void release_signals() override {}
  int signal_fd() override { return -1; }
  std::vector<int> take_signals() override { return {}; }
  int poll(std::vector<pollfd>&, std::chrono::milliseconds) override { return 0; }
  long read(int, char*, size_t) override { return 0; }
  bool send_frame(int, const std::string& frame) override {
    sent += frame;
    return true;
  }
  bool write_whole(int, const std::string&) override { return true; }
  int accept(int) override { return -1; }
  void close(int) override {}
  std::optional<ProcessEnd> reap(pid_t) override { return std::nullopt; }
  void signal_group(pid_t, int) override {}
  void watch_group(const GroupLeader&) override {}
  Clock::time_point now() override { return Clock::time_point{}; }
  pid_t parent() override { return 1; }
};

// Each payload parser on `payload`; what parses must come back from its encoder.
void parse_payload(const std::string& payload) {
  int rank = 0, code = 0, signal = 0;
  std::string host, answer;
  if (parse_hello(payload, rank, host, answer)) {
    NANO_FUZZ_CHECK(rank >= 0 && !host.empty() && !answer.empty());
    int rank2 = -1;
    std::string host2, answer2;
    NANO_FUZZ_CHECK(parse_hello(hello_payload(rank, host, answer), rank2, host2, answer2));
    NANO_FUZZ_CHECK(rank2 == rank && host2 == host && answer2 == answer);
    is_right_shim_answer(answer, kSecret, payload, rank);
  }
  if (parse_exit(payload, code, signal)) {
    int code2 = 0, signal2 = 0;
    NANO_FUZZ_CHECK(parse_exit(exit_payload(code, signal), code2, signal2) && code2 == code && signal2 == signal);
  }
  // kStarted's pid and kSignal's number, as ShimChannels and ShimLoop read them.
  if (const auto pid = parse_integer(payload, 0, INT_MAX))
    NANO_FUZZ_CHECK(parse_integer(std::to_string(*pid), 0, INT_MAX) == pid);  // "0042" reads as 42
  parse_integer(payload, 0, 64);
  if (const auto shipped = parse_shipped_records(payload)) {
    NANO_FUZZ_CHECK(is_records_file_name(shipped->first));
    NANO_FUZZ_CHECK(shipped_records_payload(shipped->first, shipped->second) == payload);
  }
}

// Feeds `bytes` to `decoder` `chunk` bytes at a time, as recv() would hand them; parses every
// frame. Returns the frames taken, encoded again (which must be the bytes they came from).
std::string decode(FrameDecoder& decoder, const std::string& bytes, size_t chunk) {
  std::string taken;
  FrameType type;
  std::string payload;
  try {
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      decoder.feed(bytes.data() + at, std::min(chunk, bytes.size() - at));
      while (decoder.next(type, payload)) {
        NANO_FUZZ_CHECK(payload.size() <= FrameDecoder::kMaxPayload);
        taken += encode_frame(type, payload);
        parse_payload(payload);
        if (type == FrameType::kHello) decoder.limit(FrameDecoder::kMaxPayload);  // as ShimChannels does
      }
    }
  } catch (const Error&) {
    // An unknown type or an oversized frame: the link closes.
  }
  return taken;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = data[0] % 61 + 1;
  const int rank = data[0] % kWorld;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  FrameDecoder stranger;
  stranger.limit(FrameDecoder::kMaxHelloPayload);
  const std::string taken = decode(stranger, bytes, chunk);
  NANO_FUZZ_CHECK(bytes.compare(0, taken.size(), taken) == 0);

  NullSink sink;
  OutputRouter router(kWorld, OutputConfig{}, sink);
  NoEvents events;
  LinkIo io;
  ShimChannels shims(kWorld, true, router, events, io);
  shims.set_secret(kSecret);

  // A stranger does not know the secret: whatever it sends, no rank is linked.
  Channel unknown;
  unknown.fd = 10;
  shims.greet(unknown);
  for (size_t at = 0; at < bytes.size(); at += chunk)
    if (shims.take(unknown, bytes.data() + at, std::min(chunk, bytes.size() - at))) break;
  for (int r = 0; r < kWorld; ++r) NANO_FUZZ_CHECK(!shims.linked(r));
  shims.forget(&unknown);

  // A shim that answered its challenge right, then sends the input.
  Channel shim;
  shim.fd = 11;
  io.sent.clear();
  shims.greet(shim);
  NANO_FUZZ_CHECK(io.sent.size() > 5);
  const std::string challenge = io.sent.substr(5);
  const std::string hello =
      encode_frame(FrameType::kHello, hello_payload(rank, "hostB", shim_answer(kSecret, challenge, rank)));
  NANO_FUZZ_CHECK(!shims.take(shim, hello.data(), hello.size()));
  NANO_FUZZ_CHECK(shims.linked(rank) && shims.hosts()[rank] == "hostB");
  bool closed = false;
  for (size_t at = 0; at < bytes.size() && !closed; at += chunk)
    closed = shims.take(shim, bytes.data() + at, std::min(chunk, bytes.size() - at));
  if (!closed) shims.ended(shim);
  return 0;
}

std::vector<std::string> nano_fuzz_seeds() {
  // What a shim sends: its hello, the pid, output, its timeline records and error file, its exit.
  const std::string hello = encode_frame(FrameType::kHello, hello_payload(2, "node-b.example", std::string(64, 'a')));
  const std::string started = encode_frame(FrameType::kStarted, "4242 8123456");  // pid, start time
  const std::string output = encode_frame(FrameType::kOut, "epoch 1 loss 0.25\npartial") +
                             encode_frame(FrameType::kErr, "\r 10%|#  |\r 20%|## |\n") +
                             encode_frame(FrameType::kOut, " line\n");
  const std::string records =
      encode_frame(FrameType::kTimeline,
                   shipped_records_payload("rank-2.attempt-1", "R 2 node-b 4-7 0 4\nS 0 100 900 10 700 150 0\n"));
  const std::string error_file =
      encode_frame(FrameType::kErrorFile, "{\"message\": {\"message\": \"RuntimeError: boom\"}}");
  const std::string exit = encode_frame(FrameType::kExit, exit_payload(1, 0));
  const std::string killed = encode_frame(FrameType::kExit, exit_payload(0, 9));
  const std::string heartbeat = encode_frame(FrameType::kHeartbeat, "");
  // What nano-run sends a shim (the same decoder reads them in the shim).
  const std::string to_shim = encode_frame(FrameType::kChallenge, std::string(16, '\x5a')) +
                              encode_frame(FrameType::kSignal, "15") + encode_frame(FrameType::kRelease, "");
  return {
      std::string(1, '\x06') + hello + started + output + heartbeat + records + error_file + exit,
      std::string(1, '\x01') + started + output + killed,
      std::string(1, '\x03') + to_shim,
      std::string(1, '\x00') + "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      std::string(1, '\x02') + encode_frame(FrameType::kHello, std::string(600, 'x')),
  };
}
