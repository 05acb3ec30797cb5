#pragma once
// A checkpoint file's format, for both APIs (the C++ Checkpointer's torch archive, the Python
// API's torch.save bytes): a text header, then the payload.
//
//   nano-checkpoint 2
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
//
// The seal is HMAC-SHA256 (core/mac.h) under the folder's key over "nano-checkpoint\0", every
// header line before the seal's, and the tags of the payload's chunks of kSealChunk bytes, each a
// GMAC (AES-256-GCM) under a key derived from the folder's (HMAC-SHA256 of
// "nano-checkpoint-chunk-key") with the nonce (8 bytes) and the chunk's index (4 bytes, big
// endian) as its IV: the chunks are sealed on every core at once at several GB/s each, and the
// step, the world, the API, the length and the folder are bound with the bytes, so a file renamed
// to another step or copied from another folder does not verify. Names are ckpt-<12-digit step>.nano, or ckpt-<step>.<8
// hex>.nano when that name was taken (checkpoint_folder.h): both sort by step. Format 1 (an unkeyed FNV-1a checksum) is
// recognised to be named and refused, never loaded. Reading is bounded: the header by
// kMaxCheckpointHeader, the payload by the file's size. Torch-free (the fuzzer of tests/fuzz
// builds it alone).
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
  int format = 0;  ///< 2 (sealed); 1 for a file of the unsealed format (recognised, never loaded)
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

/// The payload's chunks sealed one by one (the last may be shorter), read in pieces: a sealing
/// thread holds one piece, not a chunk.
inline constexpr std::size_t kSealChunk = std::size_t{64} << 20;
inline constexpr std::size_t kSealPiece = std::size_t{4} << 20;

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

/// The seal (64 hex digits) under `key` of checkpoint `h`, whose payload `source` reads; the chunks
/// are sealed by up to `threads` threads at once. Throws Error when a chunk cannot be read.
std::string checkpoint_seal(const std::string& key, const CheckpointHeader& h, const PayloadSource& source,
                            int threads);

/// The threads a seal uses here: one per core this process may run on, at most 16.
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

/// An open checkpoint file whose header has been read and whose size matches it: the payload is
/// read from the file in pieces, never whole into memory twice. Takes `fd` (closed by it).
/// Throws Error("cannot read checkpoint NAME: why"), for the caller to say who could not.
class CheckpointReader {
 public:
  CheckpointReader(int fd, const std::string& name);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  const CheckpointHeader& header() const { return header_; }
  const std::string& name() const { return name_; }
  /// Reads up to `n` payload bytes at payload offset `at` into `buffer`: the count read.
  size_t read(uint64_t at, void* buffer, size_t n) const;
  /// Why the payload does not verify under `key` ("" when it does), read in pieces.
  std::string why_not_sealed(const std::string& key) const;
  /// The open file (owned by this reader).
  int fd() const { return fd_; }

 private:
  std::string name_;
  int fd_ = -1;
  CheckpointHeader header_;
};

}  // namespace nano
