#pragma once
// The link between nano-run and an mpi-backend rank shim (one TCP connection per rank).
// Shim -> nano-run: hello, the rank's pid once started, framed stdout/stderr chunks, the rank's
// torchelastic error file (read on the rank's host: its /dev/shm is not nano-run's), its
// timeline records (from another host than nano-run's) and its final status, so nano-run tags
// whole lines and names the root cause exactly as with the subprocess backend. nano-run -> shim:
// a signal to deliver to the rank's process group (SIGKILL included), and the release that lets
// the shim exit once every rank has ended. So nano-run, not mpirun, decides when and how ranks
// are stopped, whatever mpirun's version.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace nano {

enum class FrameType : char {
  /// nano-run, the first frame of every link: 16 random bytes that the shim's hello answers
  /// with the job's secret (core/job_secret.h), so only a shim of this attempt gets in, and an
  /// overheard hello answers no other link's challenge.
  kChallenge = 'c',
  kHello = 'h',    ///< shim: "<rank> <host> <answer>", the answer in hex (shim_answer)
  kStarted = 's',  ///< shim: "<pid>" of the rank (also its process group)
  kOut = 'o',      ///< shim: stdout bytes
  kErr = 'e',      ///< shim: stderr bytes
  kExit = 'x',     ///< shim: "<exit_code> <signal>"
  /// shim, just before kExit and only when the rank wrote one: its TORCHELASTIC_ERROR_FILE's
  /// bytes (torch's JSON; at most 4 MiB of them)
  kErrorFile = 'f',
  /// shim on another host than nano-run's, before kErrorFile, with a timeline: the rank's
  /// records file (launcher/timeline/timeline_shipping.h)
  kTimeline = 't',
  kSignal = 'k',   ///< nano-run: "<signal>" to deliver to the rank's process group
  kRelease = 'r',  ///< nano-run: every rank has ended; the shim may exit
  /// either side, empty, every heartbeat_timeout / kHeartbeatsPerTimeout (launcher/process/timeouts.h): still
  /// here. A side that hears nothing for heartbeat_timeout takes the other as lost (a cut link or
  /// a dead host never closes the connection).
  kHeartbeat = 'b',
};

/// One frame: type byte, 4-byte little-endian payload length, payload.
std::string encode_frame(FrameType type, const std::string& payload);

/// Writes `bytes` (a frame from encode_frame, or output that must not be cut) whole to `fd`,
/// retrying on EINTR and on short writes; a socket never raises SIGPIPE. `wait` unset: the
/// descriptor blocks as it is set to. `wait` set: nothing blocks (a socket is written with
/// MSG_DONTWAIT), and a full socket or non-blocking descriptor is waited on for room for at
/// most that long in all. Returns false when the descriptor failed (a closed peer) or the wait
/// ran out; part of `bytes` may have gone then.
bool write_all(int fd, const std::string& bytes, std::optional<std::chrono::milliseconds> wait = std::nullopt);

/// Reassembles frames from arbitrary chunks.
class FrameDecoder {
 public:
  /// The largest payload of a frame once the peer is known (a shim's output chunk, its error
  /// file); a connection that has not said hello yet gets kMaxHelloPayload (limit()).
  static constexpr size_t kMaxPayload = 16u << 20;
  static constexpr size_t kMaxHelloPayload = 512;

  void feed(const char* data, size_t size);
  /// Takes the next complete frame; false when none is complete yet. Throws Error on an
  /// unknown type or a payload over the limit (a stray client, not a shim).
  bool next(FrameType& type, std::string& payload);
  /// Payloads over `max_payload` bytes are refused from now on.
  void limit(size_t max_payload) { max_payload_ = max_payload; }

 private:
  std::string buffer_;
  size_t max_payload_ = kMaxPayload;
};

/// The shim's answer to nano-run's `challenge` for `rank`, with the attempt's `secret`, in hex.
std::string shim_answer(const std::string& secret, const std::string& challenge, int rank);
/// Whether `answer` (hex) is shim_answer's for these; compared in constant time.
bool is_right_shim_answer(const std::string& answer, const std::string& secret, const std::string& challenge, int rank);

/// hello payload: "<rank> <host> <answer>"; exit payload: "<exit_code> <signal>".
std::string hello_payload(int rank, const std::string& host, const std::string& answer);
bool parse_hello(const std::string& payload, int& rank, std::string& host, std::string& answer);
std::string exit_payload(int exit_code, int signal);
bool parse_exit(const std::string& payload, int& exit_code, int& signal);

}  // namespace nano
