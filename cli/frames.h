#pragma once
// The byte stream from an mpi-backend rank shim back to nano-run (one TCP connection per
// rank): framed stdout/stderr chunks and the rank's final status, so nano-run tags whole lines
// and names the root cause exactly as with the subprocess backend.
#include <cstddef>
#include <string>

namespace nano {

enum class FrameType : char { hello = 'h', out = 'o', err = 'e', exit = 'x' };

/// One frame: type byte, 4-byte little-endian payload length, payload.
std::string encode_frame(FrameType type, const std::string& payload);

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
