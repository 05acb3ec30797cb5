#pragma once
// The one checkpoint engine's files: a checkpoint folder, its key and its checkpoint files, for
// both APIs (the C++ Checkpointer hands it its archive, the Python API what torch.save wrote).
//
// The folder is opened once; every entry is looked at through that handle (fstatat and openat,
// never following a link): a link, a FIFO, a folder, a file that is not this user's, a file of
// the other API, of format 1, sealed by another key or whose seal or step does not hold is never
// loaded, never counted toward `keep`, never deleted, and never the reason another file goes; each
// is named once, in one line. The key, `.nano-key` (32 random bytes as hex, 0600), is made by the
// first writer of a folder that holds no sealed checkpoint, and must be this user's private file.
// A new checkpoint is written to a temporary (O_EXCL|O_NOFOLLOW, 0600) as its bytes come (the
// Python API's torch.save writes straight into it), sealed from the page cache on every core while
// the disk writes it back, fsynced, and moved to its name only if that name is free (renameat2
// RENAME_NOREPLACE): a name taken by anything gets the checkpoint beside it under
// ckpt-<step>.<tag>.nano, never replaced nor discarded. The folder itself must be this user's and writable by no one
// else, unless the caller says it is shared on purpose.
#include <sys/stat.h>
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/checkpoint_files/checkpoint_format.h"
#include "runtime/checkpoint_files/checkpoint_reader.h"

namespace nano {

/// One entry of a checkpoint folder named like a checkpoint (or like a Python checkpoint of
/// nano_torch's format 1, a folder step-<S>).
struct CheckpointEntry {
  std::string name;
  int64_t step = 0;
  int world = 0;                ///< the world that wrote it (when its header could be read)
  std::string seal;             ///< its seal as the header says (when its header could be read)
  std::string why_not;          ///< "" when it is a whole checkpoint of this API under this folder's key
  int64_t modified_ns = 0;      ///< when it was last written: of two files of one step, the later counts first
  bool old_format = false;      ///< a checkpoint of an earlier format
  bool other_key = false;       ///< sealed, by another key than the folder's
  bool chunks_checked = false;  ///< every chunk checked, not only the seal over the header and tags
};

/// Which checkpoint a run resumes from.
struct CheckpointChoice {
  std::string name;  ///< "" when none: a fresh start (or a refusal)
  std::string seal;
  int64_t step = -1;
  int world = 0;
  /// Why the run may not start at all: no whole checkpoint, but some of an earlier format or
  /// sealed by another key (training from step 0 over them would lose them to pruning later).
  std::string refused;
  std::string note;  ///< a line to say: no usable checkpoint among damaged ones
};

/// Pure: the newest whole checkpoint of `entries` (as scan() gives them) of folder `dir`.
CheckpointChoice choose_checkpoint(const std::vector<CheckpointEntry>& entries, const std::string& dir);

class CheckpointFolder {
 public:
  enum class Role {
    kWriter,  ///< makes the folder (0700) and its key when missing; writes and prunes
    kReader,  ///< opens what a writer made (UsageError when the folder or its key is missing)
  };
  /// Opens `dir` for the checkpoints of `api` (kCppCheckpoints, kPythonCheckpoints). Throws
  /// UsageError naming `dir` and why when it cannot be made or opened, is not this user's, or is
  /// writable by others while `shared` is false; Error when its key is not this user's private
  /// file, is damaged, or is missing while sealed checkpoints are there (nano never makes a new
  /// key over them: they would be lost to it).
  CheckpointFolder(const std::string& dir, const std::string& api, Role role, bool shared);
  ~CheckpointFolder();
  CheckpointFolder(const CheckpointFolder&) = delete;
  CheckpointFolder& operator=(const CheckpointFolder&) = delete;

  const std::string& dir() const { return dir_; }

  /// Every entry named like a checkpoint, newest first, each with why it does not count: the seal
  /// over its header and tags checked and, with `chunks`, every chunk (its payload read). Each
  /// file is read once while it stays the same file (device, inode, size, change time).
  std::vector<CheckpointEntry> scan(bool chunks = true);
  /// Names, in one line to stderr, the entries of `entries` that do not count and were not named
  /// before by this object.
  void tell(const std::vector<CheckpointEntry>& entries);

  /// scan() of the seals alone (the chosen file's chunks are checked as it is loaded), tell(),
  /// choose_checkpoint(), and its note said: what rank 0 resumes from.
  CheckpointChoice choose();
  /// Checkpoint `name` was found damaged as it was loaded (`why`: which chunk): named, and never
  /// chosen, counted or deleted while it stays that file.
  void damaged(const std::string& name, const std::string& why);

  /// One checkpoint being written (checkpoint_writer.cc): append() its payload in pieces, then
  /// finish(). Throws Error naming the file when it cannot be written; a writer that did not
  /// finish leaves no temporary.
  class Writer {
   public:
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    void append(const void* data, size_t n);
    /// Seals the payload, writes the header, fsyncs, moves the file to its name (or beside a
    /// taken one) and fsyncs the folder: its file name.
    std::string finish();
    /// Gives the checkpoint up: its temporary goes (also what the destructor does unfinished).
    void abort();

   private:
    friend class CheckpointFolder;
    Writer(CheckpointFolder& folder, CheckpointHeader header, std::string temporary, int fd);
    [[noreturn]] void fail(const std::string& why);
    void seal_whole_chunks();
    struct Sealer;  // the chunks' MACs, computed in the background as the chunks are written
    CheckpointFolder& folder_;
    CheckpointHeader header_;
    std::string temporary_;
    int fd_;
    size_t header_size_;
    uint64_t bytes_ = 0;
    uint64_t sealed_chunks_ = 0;  // chunks handed to the sealer
    bool finished_ = false;
    std::string failed_;  // the first failure, said again by every later call
    std::unique_ptr<Sealer> sealer_;
  };
  /// Starts a sealed checkpoint of `step` by `world` ranks (`torch`: the writer's torch version).
  std::unique_ptr<Writer> start(int64_t step, int world, const std::string& torch);
  /// start(), append(payload), finish(): the checkpoint's file name.
  std::string write(int64_t step, int world, const std::string& torch, const void* payload, size_t bytes);
  /// Deletes the checkpoints of this API beyond the `keep` newest that verify (UsageError for
  /// `keep` < 1), only those that
  /// verify, each only while it is still the file that verified, never the one this object wrote
  /// last; `before` runs before anything is deleted (the claim's check: it may throw). Returns
  /// the names deleted; `seen`, when given, gets what its scan() found.
  std::vector<std::string> prune(int keep, const std::function<void()>& before,
                                 std::vector<CheckpointEntry>* seen = nullptr);
  /// Temporaries of a writer that was killed mid-write (this user's regular files named .tmp-*
  /// whose writer's lock is gone: one still being written stays).
  void remove_temporaries();

  /// Opens checkpoint `name` for reading (never through a link); throws Error naming it when it is
  /// no whole checkpoint file.
  std::unique_ptr<CheckpointReader> open(const std::string& name) const;
  /// Checkpoint `name` opened, its seal over its header and tags verified, and its chunks verified
  /// as they are read (CheckpointReader::verify_while_reading), all through the descriptor it is
  /// read through, so that what was checked is what is read: Error naming it when its seal does
  /// not hold, or it is not the one whose seal is `seal` (when given). A file this object wrote or
  /// verified whole, still the same file, is not checked again.
  std::unique_ptr<CheckpointReader> open_verified(const std::string& name, const std::string& seal);

  /// Why checkpoint `name` does not count ("" when it does), as scan() says.
  std::string why_not(const std::string& name);

 private:
  using Identity = std::tuple<dev_t, ino_t, off_t, int64_t>;
  static Identity identity_of(const struct stat& st);
  std::string verdict(const std::string& name, CheckpointEntry& entry, bool chunks = true);
  // A writer's file is in place as `name` (beside `taken`, when that was there): remembered whole.
  void written(const std::string& name, const CheckpointHeader& h, const std::string& taken);
  void read_or_make_key(Role role);

  std::string dir_;
  std::string api_;
  int fd_ = -1;
  std::string key_;
  std::map<std::string, std::pair<Identity, CheckpointEntry>> known_;
  std::set<std::string> told_;
  std::string last_written_;  // never pruned: this run's newest
  // One caller at a time (the Python binding lets threads in; a writer's finish() reports here).
  std::recursive_mutex mutex_;
};

/// The checkpoint settings both APIs take, checked in one place: UsageError naming the setting
/// and its value ("nano: checkpoint_keep must be at least 1, got 0").
void check_checkpoint_settings(int64_t every_steps, double every_seconds, int keep);

/// Pure: why a checkpoint folder of owner `uid` and mode `mode` may not be used by user `me`
/// ("" when it may): another user's, or writable by others (group or world) unless `shared`.
std::string why_not_private_folder(uid_t uid, mode_t mode, uid_t me, bool shared);

}  // namespace nano
