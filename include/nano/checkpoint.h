#pragma once
// Checkpoints of a training run: everything that decides the rest of the run, written so that a
// crash at any moment leaves either the previous checkpoint or the new one, and read back by
// every rank the same. With nano-run --max-restarts a killed run resumes where its last
// checkpoint left it.
//
//   nano::Checkpointer ckpt(dir, world.comm, {.every_steps = 500});
//   ckpt.track("model", *model).track("optimizer", optimizer).track("warmup", auto_lr);
//   for (int64_t step = ckpt.restore().value_or(0); step < total; ++step) {
//     ...train one step...
//     ckpt.step();
//   }
//
// A file holds a header (format, step, world size, API, libtorch version, payload size, the id of
// the folder's key and an HMAC-SHA256 seal under that key) and libtorch's archive of every tracked
// object, plus the step count and each rank's default CPU generator state. Rank 0 copies the state
// (the only part that holds training), then serialises, seals and writes it in the background: a
// temporary file in the same folder, fsync, a rename that never replaces anything, fsync of the
// folder; the newest `keep` files that verify stay. Only a file whose seal verifies under the
// folder's key (.nano-key, made by the first writer, 0600) and whose step agrees with its name is
// ever loaded, counted toward `keep` or the reason another is deleted; links, planted, damaged or
// forged files are named in one line and left in place (runtime/checkpoint_files/checkpoint_folder.h).
// restore(): rank 0 takes the newest file that verifies, every rank loads that one, and every
// tracked object is checked before any is changed: nothing is half-loaded. A checkpoint of N ranks
// resumes on M: the state is the same on every rank, and rank r takes saved rank r mod N's
// generator. Rank 0 holds the folder's claim (one live owner per folder) and checks it before
// every write and every prune: a job that lost it to another ends with one line naming the folder.
#include <torch/data/samplers/base.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nano {

class Communicator;
class AutoLr;
class FolderClaim;
class CheckpointFolder;
class CheckpointReader;
class SerialExecutor;
class Completion;

struct CheckpointOptions {
  int64_t every_steps = 0;   ///< save every this many step() calls (0 = not by steps)
  double every_seconds = 0;  ///< save at the first step() this long after the last save (0 = not by time)
  int keep = 2;              ///< checkpoints kept: the newest that verify (damaged files are never counted)
  /// The folder is shared on purpose: used even when it is another user's or writable by others
  /// (who can then plant and remove files there; nano still loads and counts only sealed ones).
  bool shared_folder = false;
};

class Checkpointer {
 public:
  /// `dir` is created when missing (rank 0, mode 0700). Throws UsageError naming `dir` when it
  /// cannot be made or written, is another user's or writable by others (unless
  /// options.shared_folder), and for bad options. Rank 0 claims `dir` for this job (a `.nano-owner.N`
  /// file whose heartbeat counter moves while it lives): another job's live claim is a UsageError
  /// naming its host, pid and start; a claim whose owner is gone (a dead process of this host, or
  /// one of another host whose heartbeat stood still while watched for 30 s) is taken over with
  /// one line; the same job's (a restart, a launching process) is kept.
  Checkpointer(std::string dir, std::shared_ptr<Communicator> comm, CheckpointOptions options = {});
  /// Waits for a write still under way.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  /// Parameters and buffers (checked by name, shape and dtype on restore).
  Checkpointer& track(const std::string& name, torch::nn::Module& module);
  /// Optimizer state: momentum and moments, param-group options (learning rates included).
  Checkpointer& track(const std::string& name, torch::optim::Optimizer& optimizer);
  /// The warm-up position (it continues towards the current world size after a resume).
  Checkpointer& track(const std::string& name, AutoLr& warmup);
  /// A data sampler's position (nano's EpochShardSampler: epoch and position in it).
  Checkpointer& track(const std::string& name, torch::data::samplers::Sampler<>& sampler);
  /// A tensor of your own (copied into in place on restore; same shape and dtype).
  Checkpointer& track(const std::string& name, torch::Tensor& tensor);
  /// A label that must match: `value` is written; a restore refuses a checkpoint whose label
  /// differs (checked with the tensors, before anything is changed), naming both values. A
  /// checkpoint without the label counts as `missing` (written before it was tracked).
  Checkpointer& track_label(const std::string& name, const std::string& value, const std::string& missing);
  /// How a generic object's archive reaches the background writer.
  enum class Saved {
    kReferences,  ///< `save` may write live tensors: its archive is serialised at once (a snapshot)
    kValues,      ///< `save` writes values no later step changes (fresh tensors, clones): serialised
                  ///< in the background with the rest
  };
  /// Anything else: `save` writes it into its own archive; `load` reads it back, after every
  /// tracked object has been read and checked (a throw from `load` itself may leave it half set).
  Checkpointer& track(const std::string& name, std::function<void(torch::serialize::OutputArchive&)> save,
                      std::function<void(torch::serialize::InputArchive&)> load, Saved saved = Saved::kReferences);

  /// Collective. Loads the newest checkpoint of `dir` that verifies into every tracked object
  /// and returns its step; nullopt when there is none (a fresh start). Throws nano::Error naming
  /// the file and the first mismatch when it does not fit what is tracked.
  std::optional<int64_t> restore();
  /// Counts one step; saves when a bound says so. When the previous checkpoint is still being
  /// written, this one waits for it: at most one staged copy is ever in flight, and how often and
  /// how long checkpoints waited is said in one line when this object ends. Returns true when it
  /// saved. Collective in the sense that every rank must call it equally often. Throws nano::Error
  /// (rank 0) once the folder's claim was found taken by another job. In an elastic launch with
  /// rejoin, a checkpoint after nano-run asked the ranks to stop (a host came back) is the last:
  /// once it is on disk every rank exits with 75 and the world grows again at this step.
  bool step();
  /// Saves now (after the previous write, if one is still under way). The training thread is
  /// held only while the state is copied: each tracked tensor is cloned (an object whose save()
  /// may write live tensors is serialised), then a background thread serialises the copy,
  /// checksums it and writes it. A write that fails (a full disk) is reported in one line and
  /// leaves the previous checkpoints as they were; training goes on.
  void save();
  /// Blocks until the checkpoint being written, if any, is on disk (and older ones beyond `keep`
  /// are gone). Throws nano::Error when the write found the folder taken by another job.
  void wait();
  /// Checkpoints that came due while the previous one was still being written (and waited).
  int64_t waited() const { return waited_; }

  int64_t steps() const { return steps_; }
  /// Sets the step count (for a program that counted steps before making this object): the
  /// next file names and the step restore() returns go on from it.
  void set_steps(int64_t steps) { steps_ = steps; }
  const std::string& dir() const { return dir_; }
  /// The file the last save wrote (or is writing), "" before the first.
  const std::string& last_path() const { return last_path_; }

 private:
  /// What the writer does with a staged copy: writes it into the object's own archive.
  using StagedWrite = std::function<void(torch::serialize::OutputArchive&)>;
  struct Entry {
    std::string name;
    // On the training thread: copies what the object holds; the result runs on the writer's.
    std::function<StagedWrite()> stage;
    // Reads and checks into temporaries; returns the function that applies them.
    std::function<std::function<void()>(torch::serialize::InputArchive&)> load;
  };
  // A checkpoint read and checked against what is tracked, nothing changed yet.
  struct Loaded {
    std::vector<std::function<void()>> apply;
    at::Tensor rng, steps;
    std::string damaged;  // the chunk that did not verify as it was read ("" when whole)
  };
  Loaded load(CheckpointReader& reader);
  int64_t apply(Loaded& loaded);
  void wait_writer();
  bool writer_busy() const;
  void throw_if_lost();
  struct WriterReport;

  void stop_if_asked();
  std::string dir_;
  std::shared_ptr<Communicator> comm_;
  CheckpointOptions options_;
  std::vector<Entry> entries_;
  struct Label {
    std::string name, value, missing;
  };
  std::vector<Label> labels_;
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point last_save_;
  std::string last_path_;
  bool last_written_ = false;           // the last save's file is on disk (rank 0, known once the writer is waited for)
  std::shared_ptr<FolderClaim> claim_;  // rank 0: this job owns dir_ (declared before writer_: outlives it)
  std::shared_ptr<CheckpointFolder> folder_;  // its files, opened once (rank 0 writes, every rank reads)
  std::function<void()> claim_check_;         // rank 0: throws when the folder is no longer this job's
  std::shared_ptr<WriterReport> report_;      // set by the writer: what it wrote, or that the folder was taken
  // Rank 0's background writer: one thread for the object's life (made by the first save), so a
  // save does not pay for starting a thread; `written_` is the last write's completion.
  std::unique_ptr<SerialExecutor> writer_;
  std::shared_ptr<Completion> written_;
  std::shared_ptr<std::atomic<bool>> writing_ = std::make_shared<std::atomic<bool>>(false);
  int64_t waited_ = 0;
  double waited_seconds_ = 0;
  int64_t due_ = 0;
};

/// An optimizer's whole state: libtorch's Optimizer::save() plus each param group's learning
/// rate, which libtorch's load() leaves as it was (1.13 restores the moments, not the group
/// options). load_optimizer() throws nano::Error when the group count differs.
void save_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive);
void load_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::InputArchive& archive);

/// Makes `dir` (and its parents; `dir` itself 0700) when missing, with its key, and checks that
/// files can be made in it and that it is this user's alone (unless `shared`). Throws
/// UsageError naming `dir` and why ("nano: cannot write into checkpoint folder /x: Permission
/// denied"), and when another job owns it ("nano: checkpoint folder /x is in use by job J (host
/// h, pid 12, since ...): ..."; a folder has one live owner, see Checkpointer). Programs call it before starting
/// anything, so a bad folder costs no training. In a tuning trial (NANO_TUNE_TRIAL=1, `nano-run --tune`) it makes and
/// checks nothing.
void prepare_checkpoint_dir(const std::string& dir, bool shared = false);

/// The checkpoint file name of `step` ("ckpt-000000000500.nano").
std::string checkpoint_file_name(int64_t step);

/// Verifies a checkpoint file of the C++ API under its folder's key; returns "" when it is whole
/// and sealed, else why not ("truncated: 100 of 4096 payload bytes", "its seal does not verify
/// (damaged or forged)", "a symbolic link", "its header says step 7").
std::string verify_checkpoint(const std::string& path);

}  // namespace nano
