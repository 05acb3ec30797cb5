#pragma once
// One checkpoint file opened for reading (its format: checkpoint_format.h). Opening checks its
// header and that its size is exactly header, payload and tags. Verifying checks the seal over
// the header and the chunks' tags first (a few bytes), then every chunk against its tag: all of
// them before anything is read (why_not_sealed: what a folder's scan and pruning ask), or on
// other cores while the payload is read (verify_while_reading: what a resume asks), each read
// then returning only bytes whose chunks verified. The payload is read in pieces, never held
// whole in memory twice.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/checkpoint_files/checkpoint_format.h"

namespace nano {

class CheckpointReader {
 public:
  /// Takes `fd` (closed by it). Throws Error("cannot read checkpoint NAME: why"), for the caller to
  /// say who could not, when it is no whole checkpoint file: not a regular file, no header, or a
  /// size other than its header, payload and tags say.
  CheckpointReader(int fd, const std::string& name);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointHeader& header() const { return header_; }
  const std::string& name() const { return name_; }
  /// The open file (owned by this reader).
  int fd() const { return fd_; }

  /// Why the seal over the header and the chunks' tags does not hold under `key` ("" when it
  /// does): an earlier format, another key's, or damaged or forged. Reads no payload.
  std::string why_seal_fails(const std::string& key) const;
  /// Why the checkpoint does not verify under `key` ("" when it does): the seal, then every chunk
  /// against its tag, on every core.
  std::string why_not_sealed(const std::string& key) const;

  /// From now on read() returns only bytes whose chunks verified under `key`: the chunks are
  /// checked in order on the other cores while the caller reads (a chunk no thread has begun, the
  /// caller checks itself). The seal must hold (why_seal_fails): Error naming the file otherwise.
  void verify_while_reading(const std::string& key);
  /// Reads up to `n` payload bytes at payload offset `at` into `buffer`: the count read. While
  /// verifying, it returns once the chunks they lie in verified, and throws Error naming the file
  /// and the chunk when one did not (why_damaged() then says it).
  size_t read(uint64_t at, void* buffer, size_t n);
  /// While verifying: waits until every chunk was checked; throws as read() does.
  void wait_verified();
  /// The first chunk found damaged while verifying, in one line ("" while none).
  std::string why_damaged() const;

 private:
  struct Verifier;
  std::string name_;
  int fd_ = -1;
  CheckpointHeader header_;
  std::vector<Tag> tags_;  // the chunks' tags the file holds after its payload
  std::unique_ptr<Verifier> verifier_;
};

}  // namespace nano
