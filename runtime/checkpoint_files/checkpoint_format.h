#pragma once
// A checkpoint file's format, for both APIs (the C++ Checkpointer's torch archive, the Python
// API's torch.save bytes): a text header, the payload, then its chunks' tags.
//
//   nano-checkpoint 3
//   step 500
//   world 4
//   api c++                 (or python: one API never loads the other's)
//   torch 2.6.0
//   bytes 00000000000000123456  (20 digits: the header's length is known before the payload)
//   key 3f2a...             (the folder key's id: 16 hex digits)
//   nonce 9d0c...           (16 random hex digits: the chunks' GMAC nonces)
//   hmac-sha256 9c1e...     (64 hex digits)
//   <blank line>
//   <payload>
//   <the tags of the payload's chunks: 16 bytes each, in order>
//
// The payload is sealed in chunks of kSealChunk bytes, each by a GMAC (AES-256-GCM) tag under a
// key derived from the folder's (HMAC-SHA256 of "nano-checkpoint-chunk-key") with the nonce (8
// bytes) and the chunk's index (4 bytes, big endian) as its IV; the seal is HMAC-SHA256
// (core/mac.h) under the folder's key over "nano-checkpoint\0", every header line before the
// seal's, and those tags. The chunks are sealed on every core at once at several GB/s each, and
// the step, the world, the API, the length and the folder are bound with the bytes, so a file
// renamed to another step or copied from another folder does not verify. The tags are in the
// file so that a reader checks the seal over them at once and then each chunk on other cores
// while the chunks before it are read (checkpoint_reader.h): verifying costs a load almost
// nothing. Names are ckpt-<12-digit step>.nano, or ckpt-<step>.<8 hex>.nano when that name was
// taken (checkpoint_folder.h): both sort by step. Formats 1 (an unkeyed FNV-1a checksum) and 2
// (the seal without the tags in the file) are recognised to be named and refused, never loaded.
// Reading is bounded: the header by kMaxCheckpointHeader, the payload by the file's size.
// Torch-free (the fuzzer of tests/fuzz builds it alone).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/mac.h"

namespace nano {

/// What a checkpoint file's header says; payload_at is where its payload starts.
struct CheckpointHeader {
  int format = 0;  ///< 3; 1 or 2 for a file of an earlier format (recognised, never loaded)
  int64_t step = -1;
  int world = 0;
  std::string api;     ///< "c++" or "python"
  std::string torch;   ///< the libtorch (TORCH_VERSION) or torch (__version__) that wrote it
  uint64_t bytes = 0;  ///< payload bytes
  std::string key;     ///< the sealing key's id (checkpoint_key_id)
  std::string nonce;   ///< 16 hex digits, new for every checkpoint
  std::string seal;    ///< HMAC-SHA256, 64 hex digits
  size_t payload_at = 0;
};

/// The longest header a checkpoint file may have (its blank line included).
inline constexpr size_t kMaxCheckpointHeader = 4096;

/// The APIs a checkpoint may be written by.
inline constexpr const char* kCppCheckpoints = "c++";
inline constexpr const char* kPythonCheckpoints = "python";

/// Pure: the id of a folder key, written in each header it seals (16 hex digits of a SHA-256 of
/// it): a file sealed by another folder's key is told apart from a forged or damaged one.
std::string checkpoint_key_id(const std::string& key);

/// Pure: the header lines the seal covers (every one before "hmac-sha256").
std::string checkpoint_sealed_lines(const CheckpointHeader& h);

/// Pure: the whole header: the sealed lines, the seal (h.seal, or 64 zeros while it is still
/// unknown: the seal's line has the same length either way) and the blank line.
std::string checkpoint_header(const CheckpointHeader& h);

/// The format this nano writes and reads.
inline constexpr int kCheckpointFormat = 3;

/// The payload's chunks sealed one by one (the last may be shorter), read in pieces: a sealing
/// thread holds one piece, not a chunk. A reader waits for the first chunk it reads to verify:
/// small enough for that to be short, large enough for its tag to cost nothing.
inline constexpr std::size_t kSealChunk = std::size_t{16} << 20;
inline constexpr std::size_t kSealPiece = std::size_t{64} << 10;

/// Pure: how many chunks (and tags at the file's end) a payload of `bytes` has.
inline uint64_t checkpoint_chunks(uint64_t bytes) { return (bytes + kSealChunk - 1) / kSealChunk; }

/// Pure: the bytes of chunk `index` of a payload of `bytes`.
inline std::size_t checkpoint_chunk_bytes(uint64_t index, uint64_t bytes) {
  return static_cast<std::size_t>(std::min<uint64_t>(kSealChunk, bytes - index * kSealChunk));
}

/// Where a seal reads the payload: a pointer to its `n` bytes at payload offset `at` (copied into
/// `scratch` when they must be read), or nullptr when they cannot be read.
using PayloadSource = std::function<const char*(uint64_t at, std::size_t n, std::vector<char>& scratch)>;

/// The tag of chunk `index` (`n` bytes) of the payload of checkpoint `h` (its nonce) under folder
/// key `key`, read from `source` in pieces of at most kSealPiece bytes (into `scratch`). Throws
/// Error when the chunk cannot be read.
Tag checkpoint_chunk_tag(const std::string& key, const CheckpointHeader& h, uint64_t index, std::size_t n,
                         const PayloadSource& source, std::vector<char>& scratch);

/// Pure: the seal (64 hex digits) of checkpoint `h` whose chunks' tags are `tags`, in order.
std::string checkpoint_seal_of(const std::string& key, const CheckpointHeader& h, const std::vector<Tag>& tags);

/// Where a seal reads the payload of file `fd`, whose payload starts at `payload_at`: each piece
/// read into the scratch buffer.
PayloadSource payload_in_file(int fd, uint64_t payload_at);

/// The threads that seal or verify chunks beside the thread that writes or reads them: one per
/// core this process may run on but that thread's, at least 1, at most 15.
int seal_threads();

/// Pure: reads the header at the start of `text` into `h`; false when it has no whole nano header
/// within kMaxCheckpointHeader bytes (format 1's is parsed too: h.format says which).
bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h);

/// The checkpoint file name of `step` ("ckpt-000000000500.nano"), and the one used beside it when
/// that name is taken by something else ("ckpt-000000000500.1a2b3c4d.nano", `tag`: 8 hex digits).
/// Declared for the public API in <nano/checkpoint.h> too, whose torch headers this file does without.
std::string checkpoint_file_name(int64_t step);
std::string checkpoint_file_name(int64_t step, const std::string& tag);

/// Pure: the step a checkpoint's file name says, nullopt for a name that is none.
std::optional<int64_t> checkpoint_step_of(const std::string& name);

/// One checkpoint file as pruning sees it.
struct CheckpointFile {
  int64_t step = 0;
  std::string path;
  bool verified = false;  ///< its seal holds under this folder's key and it is this API's
};

/// Pure: the files to delete so that the `keep` newest verified checkpoints stay. A verified file
/// is deleted only when `keep` newer verified files exist (of higher steps, or of its step and
/// before it in `files`: written later); a file that did not verify is never deleted (it is
/// named to the user instead) and never counts.
std::vector<std::string> checkpoints_to_prune(std::vector<CheckpointFile> files, int keep);

/// Reads up to `n` bytes of file `fd` at `at` into `buffer`, again after an interruption or a
/// short read: the count read (short only at the end of the file or on an error).
size_t read_at(int fd, void* buffer, size_t n, uint64_t at);

/// Writes all `n` bytes at `data` to file `fd` at `at`, again after an interruption or a short
/// write; throws Error with the system's reason when it cannot.
void write_at(int fd, const void* data, size_t n, uint64_t at);

}  // namespace nano
