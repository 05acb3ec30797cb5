#pragma once
// The link between nano-run and an mpi-backend rank shim (one TCP connection per rank).
// Shim -> nano-run: hello, the rank's pid once started, framed stdout/stderr chunks, the rank's
// torchelastic error file (read on the rank's host: its /dev/shm is not nano-run's) and its
// final status, so nano-run tags whole lines and names the root cause exactly as with the
// subprocess backend. nano-run -> shim: a signal to deliver to the rank's process group
// (SIGKILL included), and the release that lets the shim exit once every rank has ended. So
// nano-run, not mpirun, decides when and how ranks are stopped, whatever mpirun's version.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace nano {

enum class FrameType : char {
  kHello = 'h',    ///< shim: "<token> <rank> <host>"
  kStarted = 's',  ///< shim: "<pid>" of the rank (also its process group)
  kOut = 'o',      ///< shim: stdout bytes
  kErr = 'e',      ///< shim: stderr bytes
  kExit = 'x',     ///< shim: "<exit_code> <signal>"
  /// shim, just before kExit and only when the rank wrote one: its TORCHELASTIC_ERROR_FILE's
  /// bytes (torch's JSON; at most 4 MiB of them)
  kErrorFile = 'f',
  kSignal = 'k',   ///< nano-run: "<signal>" to deliver to the rank's process group
  kRelease = 'r',  ///< nano-run: every rank has ended; the shim may exit
  /// either side, empty, every heartbeat_timeout / kHeartbeatsPerTimeout (cli/timeouts.h): still
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
  void feed(const char* data, size_t size);
  /// Takes the next complete frame; false when none is complete yet. Throws Error on an
  /// unknown type or a payload over 16 MiB (a stray client, not a shim).
  bool next(FrameType& type, std::string& payload);

 private:
  std::string buffer_;
};

/// hello payload: "<token> <rank> <host>"; exit payload: "<exit_code> <signal>".
std::string hello_payload(const std::string& token, int rank, const std::string& host);
bool parse_hello(const std::string& payload, std::string& token, int& rank, std::string& host);
std::string exit_payload(int exit_code, int signal);
bool parse_exit(const std::string& payload, int& exit_code, int& signal);

}  // namespace nano
