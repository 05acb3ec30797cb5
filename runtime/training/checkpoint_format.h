#pragma once
// The checkpoint file's format (nano::Checkpointer writes it, verify_checkpoint checks it): a
// text header (magic line, step, world size, torch version, payload bytes and their FNV-1a
// checksum, a blank line), then torch's archive of the tracked state. Names are
// ckpt-<12-digit step>.nano, so they sort by step. Which files may be pruned is a pure decision
// (checkpoints_to_prune): a file that does not verify never counts toward `keep` and is never
// deleted. Reading is bounded: the header by kMaxCheckpointHeader, the payload by the file's size.
// Torch-free (the fuzzer of tests/fuzz builds it alone).
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nano {

/// What a checkpoint file's header says; payload_at is where its payload starts.
struct CheckpointHeader {
  int64_t step = -1;
  int world = 0;
  std::string torch;
  uint64_t bytes = 0;
  uint64_t sum = 0;
  size_t payload_at = 0;
};

/// The longest header a checkpoint file may have (its blank line included).
inline constexpr size_t kMaxCheckpointHeader = 4096;

/// Pure: the header of a checkpoint of `step`, written by `world` ranks with libtorch `torch`
/// (TORCH_VERSION), carrying `payload`.
std::string checkpoint_header(int64_t step, int world, const std::string& torch, const std::string& payload);

/// Pure: reads the header at the start of `text` into `h`; false when it has no whole nano header
/// within kMaxCheckpointHeader bytes.
bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h);

/// Pure: the checksum of a payload (FNV-1a, 64 bits): damage, not tampering, is what it finds.
/// `seed` continues a checksum over a payload read in pieces. (The first seed is not FNV's usual
/// offset basis, which has one digit more: files already written carry sums from this one.)
inline constexpr uint64_t kChecksumSeed = 1469598103934665603ULL;
uint64_t checkpoint_checksum(const char* p, std::size_t n, uint64_t seed = kChecksumSeed);

/// The checkpoint file name of `step` ("ckpt-000000000500.nano"); declared for the public API in
/// <nano/checkpoint.h> too, whose torch headers this torch-free file does without.
std::string checkpoint_file_name(int64_t step);

/// Why the file at `path` is not a whole checkpoint, "" when it is (as <nano/checkpoint.h> says).
std::string verify_checkpoint(const std::string& path);

/// The checkpoints of `dir` (files named as checkpoint_file_name says), newest first, as
/// (step, path); none when the folder cannot be read.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

/// One checkpoint file as pruning sees it.
struct CheckpointFile {
  int64_t step = 0;
  std::string path;
  bool verified = false;  ///< whole: its header and checksum hold
};

/// Pure: the files to delete so that the `keep` newest verified checkpoints stay. A verified file
/// is deleted only when `keep` verified files of higher steps exist; a file that did not verify is
/// never deleted (it is named to the user instead) and never counts.
std::vector<std::string> checkpoints_to_prune(std::vector<CheckpointFile> files, int keep);

/// An open checkpoint file whose header has been read and whose size matches it: the payload is
/// read from the file in pieces, never whole into memory twice. Throws Error("cannot read
/// checkpoint PATH: why"), for the caller to say who could not.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  const CheckpointHeader& header() const { return header_; }
  /// Reads up to `n` payload bytes at payload offset `at` into `buffer`: the count read.
  size_t read(uint64_t at, void* buffer, size_t n) const;

 private:
  std::string path_;
  int fd_ = -1;
  CheckpointHeader header_;
};

/// Which checkpoint files verify, each read once while it stays the same file (device, inode,
/// size and modification time): pruning asks after every write, and only new files are read.
class CheckpointVerdicts {
 public:
  /// "" when `path` verifies, else why not (as verify_checkpoint says).
  std::string why_not(const std::string& path);
  /// A file this process has just written whole (and fsynced): verified without reading it.
  void written(const std::string& path);

 private:
  using Identity = std::tuple<dev_t, ino_t, off_t, int64_t>;
  std::map<std::string, std::pair<Identity, std::string>> known_;
};

}  // namespace nano
