#include <nano/checkpoint.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/version.h>

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>

#include <nano/auto_lr.h>
#include <nano/communicator.h>
#include <nano/error.h>
#include "runtime/checkpoint_files/checkpoint_folder.h"
#include "runtime/checkpoint_files/checkpoint_stop.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/folder_claim/folder_claim.h"
#include "runtime/rendezvous/rendezvous.h"  // first_line
#include "runtime/timeline/recorder.h"
#include "runtime/timeline/step_report.h"
#include "runtime/training/checkpoint_staging.h"

namespace nano {

namespace {

// The folder was taken by another job: what the writer hands the training thread, apart from a
// write that failed (a full disk), after which training goes on.
class ClaimLost : public Error {
 public:
  using Error::Error;
};

}  // namespace

/// What the writer tells the training thread: the file it wrote (its name may not be the one
/// due, when that was taken), and why this job may no longer write into its folder (which ends
/// the job).
struct Checkpointer::WriterReport {
  std::mutex mutex;
  std::string lost, written;
  void set_lost(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    if (lost.empty()) lost = text;
  }
  std::string get_lost() {
    std::lock_guard<std::mutex> lock(mutex);
    return lost;
  }
  void set_written(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex);
    written = path;
  }
  std::string take_written() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(written, "");
  }
};

void prepare_checkpoint_dir(const std::string& dir, bool shared) {
  if (dir.empty()) throw UsageError("nano: the checkpoint folder is empty");
  if (in_tuning_trial()) return;  // a trial makes nothing of the user's (nor writes there)
  CheckpointFolder(dir, kCppCheckpoints, CheckpointFolder::Role::kWriter, shared);  // made, private, keyed
  check_folder_claim(dir);  // another job's live folder: refused before anything trains
}

namespace {

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "] " + std::string(c10::toString(t.scalar_type()));
}

// Archive keys cannot hold '.', which module paths use.
std::string key_of(const std::string& name) {
  std::string k = name;
  std::replace(k.begin(), k.end(), '.', '|');
  return k;
}

// Reads `what` into a temporary and checks it against `target`; the copy happens later.
at::Tensor read_checked(torch::serialize::InputArchive& a, const std::string& what, const std::string& name,
                        const at::Tensor& target, bool buffer) {
  at::Tensor value;
  if (!a.try_read(key_of(name), value, buffer)) throw Error("it has no " + what + " " + name);
  if (value.sizes() != target.sizes() || value.scalar_type() != target.scalar_type())
    throw Error(what + " " + name + " is " + shape_of(value) + " there and " + shape_of(target) + " here");
  return value;
}

std::string label_key(const std::string& name) { return "nano|label|" + key_of(name); }

at::Tensor bytes_of(const std::string& text) {
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), t.data_ptr<uint8_t>());
  return t;
}

std::string text_of(const at::Tensor& bytes) {
  const auto* p = bytes.data_ptr<uint8_t>();
  return std::string(p, p + bytes.numel());
}

}  // namespace

Checkpointer::Checkpointer(std::string dir, std::shared_ptr<Communicator> comm, CheckpointOptions options)
    : dir_(std::move(dir)),
      comm_(std::move(comm)),
      options_(options),
      last_save_(std::chrono::steady_clock::now()),
      report_(std::make_shared<WriterReport>()) {
  if (dir_.empty()) throw UsageError("nano: the checkpoint folder is empty");
  planned_stops_on();  // the signal's handler, before a loader's threads start
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  check_checkpoint_settings(options_.every_steps, options_.every_seconds, options_.keep);
  // A tuning trial leaves the user's folder as it is: not made, not cleaned, never written.
  if (comm_->rank() == 0 && !in_tuning_trial()) {
    folder_ = std::make_shared<CheckpointFolder>(dir_, kCppCheckpoints, CheckpointFolder::Role::kWriter,
                                                 options_.shared_folder);
    check_folder_claim(dir_);                      // refused before anything is made
    claim_ = std::make_shared<FolderClaim>(dir_);  // before touching what may be another job's
    // Checked by the writer before every write and prune, by the job's identity: the launching
    // process of an in-program launch may hold the claim for this rank.
    claim_check_ = [claim = claim_] {
      try {
        claim->check();
      } catch (const ClaimUnreadable&) {
        throw;  // nothing known this time: this checkpoint is not written, training goes on
      } catch (const Error& e) {
        throw ClaimLost(e.what());
      }
    };
    // Temporaries of a writer that was killed mid-write: never a checkpoint, only space.
    folder_->remove_temporaries();
  }
}

Checkpointer::~Checkpointer() {
  wait_writer();  // then the claim goes, with the last write done
  if (const std::string why = report_->get_lost(); !why.empty()) std::cerr << why << std::endl;
  if (waited_ > 0 && comm_->rank() == 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", waited_seconds_);
    std::cerr << "nano: " << waited_ << " of " << due_ << " checkpoints due in " << dir_
              << " waited for the previous one to be written, " << seconds
              << " s in all (checkpoint less often, or to faster storage)" << std::endl;
  }
}

void Checkpointer::wait() {
  wait_writer();
  throw_if_lost();
}

void Checkpointer::wait_writer() {
  if (written_) written_->wait();  // the write catches its own errors: this only waits
  written_.reset();
  if (std::string path = report_->take_written(); !path.empty()) {
    last_path_ = std::move(path);
    last_written_ = true;
  }
}

bool Checkpointer::writer_busy() const { return writing_->load(); }

Checkpointer& Checkpointer::track(const std::string& name, torch::nn::Module& module) {
  // Copies: they are written while training changes the originals. Into the same buffers each
  // time (the previous write is over when the next is staged): no fresh pages to fault in.
  auto buffers_of = std::make_shared<std::vector<at::Tensor>>();
  entries_.push_back({name,
                      [&module, buffers_of] {
                        at::NoGradGuard no_grad;
                        std::vector<std::pair<std::string, at::Tensor>> params, buffers;
                        std::size_t i = 0;
                        for (const auto& p : module.named_parameters())
                          params.emplace_back(key_of(p.key()), staged_copy(p.value().detach(), *buffers_of, i++));
                        for (const auto& b : module.named_buffers())
                          buffers.emplace_back(key_of(b.key()), staged_copy(b.value(), *buffers_of, i++));
                        return StagedWrite([params = std::move(params),
                                            buffers = std::move(buffers)](torch::serialize::OutputArchive& a) {
                          for (const auto& [key, t] : params) a.write(key, t);
                          for (const auto& [key, t] : buffers) a.write(key, t, true);
                        });
                      },
                      [&module](torch::serialize::InputArchive& a) {
                        std::vector<std::pair<at::Tensor, at::Tensor>> copies;
                        for (const auto& p : module.named_parameters())
                          copies.emplace_back(p.value(), read_checked(a, "parameter", p.key(), p.value(), false));
                        for (const auto& b : module.named_buffers())
                          copies.emplace_back(b.value(), read_checked(a, "buffer", b.key(), b.value(), true));
                        return std::function<void()>([copies] {
                          at::NoGradGuard no_grad;
                          for (const auto& [target, value] : copies) const_cast<at::Tensor&>(target).copy_(value);
                        });
                      }});
  return *this;
}

Checkpointer& Checkpointer::track(const std::string& name, std::function<void(torch::serialize::OutputArchive&)> save,
                                  std::function<void(torch::serialize::InputArchive&)> load, Saved saved) {
  // Values: the archive they write is kept as it is; references: serialised at once, into bytes.
  std::function<StagedWrite()> stage = [save = std::move(save), saved] {
    auto inner = std::make_shared<torch::serialize::OutputArchive>();
    save(*inner);
    if (saved == Saved::kValues)
      return StagedWrite([inner](torch::serialize::OutputArchive& a) { a = std::move(*inner); });
    at::Tensor bytes = serialised_bytes(*inner);
    return StagedWrite([bytes](torch::serialize::OutputArchive& a) { write_serialised(a, bytes); });
  };
  entries_.push_back({name, std::move(stage), [load = std::move(load)](torch::serialize::InputArchive& a) {
                        // libtorch loads these objects only in place: done after every check.
                        std::shared_ptr<torch::serialize::InputArchive> sub = read_serialised(a);
                        if (!sub) sub = std::make_shared<torch::serialize::InputArchive>(std::move(a));
                        return std::function<void()>([load, sub] { load(*sub); });
                      }});
  return *this;
}

Checkpointer& Checkpointer::track_label(const std::string& name, const std::string& value, const std::string& missing) {
  labels_.push_back({name, value, missing});
  return *this;
}

void save_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive) {
  optimizer.save(archive);
  std::vector<double> rates;
  for (auto& group : optimizer.param_groups()) rates.push_back(group.options().get_lr());
  archive.write("nano|lr", at::tensor(rates, at::kDouble), /*is_buffer=*/true);
}

void load_optimizer(torch::optim::Optimizer& optimizer, torch::serialize::InputArchive& archive) {
  optimizer.load(archive);
  at::Tensor rates;
  if (!archive.try_read("nano|lr", rates, /*is_buffer=*/true)) return;  // saved by libtorch alone
  auto& groups = optimizer.param_groups();
  if (static_cast<std::size_t>(rates.numel()) != groups.size())
    throw Error("nano: the saved optimizer has " + std::to_string(rates.numel()) + " param groups, this one " +
                std::to_string(groups.size()));
  for (std::size_t g = 0; g < groups.size(); ++g)
    groups[g].options().set_lr(rates[static_cast<int64_t>(g)].item<double>());
}

Checkpointer& Checkpointer::track(const std::string& name, torch::optim::Optimizer& optimizer) {
  track(
      name, [&optimizer](torch::serialize::OutputArchive& a) { save_optimizer(optimizer, a); },
      [&optimizer](torch::serialize::InputArchive& a) { load_optimizer(optimizer, a); }, Saved::kReferences);
  // libtorch's own optimizers: a snapshot of their state, serialised by the writer as
  // save_optimizer() would; others are serialised at once (above).
  entries_.back().stage = [&optimizer, fallback = entries_.back().stage,
                           buffers = std::make_shared<std::vector<at::Tensor>>()] {
    StagedWrite state = stage_optimizer(optimizer, *buffers);
    if (!state) return fallback();
    std::vector<double> rates;
    for (auto& group : optimizer.param_groups()) rates.push_back(group.options().get_lr());
    return StagedWrite([state = std::move(state), rates](torch::serialize::OutputArchive& a) {
      state(a);
      a.write("nano|lr", at::tensor(rates, at::kDouble), /*is_buffer=*/true);
    });
  };
  return *this;
}

// The warm-up and samplers write fresh tensors of their counters: values already.
Checkpointer& Checkpointer::track(const std::string& name, AutoLr& warmup) {
  return track(
      name, [&warmup](torch::serialize::OutputArchive& a) { warmup.save(a); },
      [&warmup](torch::serialize::InputArchive& a) { warmup.load(a); }, Saved::kValues);
}

Checkpointer& Checkpointer::track(const std::string& name, torch::data::samplers::Sampler<>& sampler) {
  return track(
      name, [&sampler](torch::serialize::OutputArchive& a) { sampler.save(a); },
      [&sampler](torch::serialize::InputArchive& a) { sampler.load(a); }, Saved::kValues);
}

Checkpointer& Checkpointer::track(const std::string& name, torch::Tensor& tensor) {
  entries_.push_back({name,
                      [&tensor] {
                        return StagedWrite([copy = tensor.detach().clone()](torch::serialize::OutputArchive& a) {
                          a.write("value", copy);
                        });
                      },
                      [&tensor](torch::serialize::InputArchive& a) {
                        at::Tensor value = read_checked(a, "tensor", "value", tensor, false);
                        return std::function<void()>([&tensor, value] {
                          at::NoGradGuard no_grad;
                          tensor.copy_(value);
                        });
                      }});
  return *this;
}

void Checkpointer::throw_if_lost() {
  if (const std::string why = report_->get_lost(); !why.empty()) throw Error(why);
}

bool Checkpointer::step() {
  throw_if_lost();
  ++steps_;
  bool due = options_.every_steps > 0 && steps_ % options_.every_steps == 0;
  if (!due && options_.every_seconds > 0) {
    // Every rank must decide alike: rank 0's clock decides, through the communicator.
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save_).count();
    at::Tensor flag = at::full({1}, comm_->rank() == 0 && elapsed >= options_.every_seconds ? 1.0 : 0.0, at::kDouble);
    comm_->broadcast(flag, 0);
    due = flag.item<double>() > 0;
  }
  if (!due) return false;
  ++due_;
  const int64_t held = timeline::now_ns();
  // A checkpoint due while the previous one is still being written waits for it (save() joins
  // the writer): one staged copy in flight at most, and no checkpoint lost. Counted for the
  // closing line, which says to checkpoint less often.
  if (comm_->rank() == 0 && writer_busy()) {
    ++waited_;
    const auto start = std::chrono::steady_clock::now();
    wait_writer();
    waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  save();
  timeline::checkpoint_since(held);
  if (planned_stops_on()) stop_if_asked();
  return true;
}

// A planned stop (runtime/checkpoint_files/checkpoint_stop.h): every rank learns whether any was asked,
// and all stop together once the checkpoint just saved is on disk.
void Checkpointer::stop_if_asked() {
  at::Tensor asked = at::full({1}, stop_asked() ? 1.0 : 0.0, at::kDouble);
  comm_->all_reduce(asked, ReduceOp::kSum);
  if (asked.item<double>() <= 0) return;
  wait();  // rank 0: the write is over (throws when the folder was taken)
  // Only at a checkpoint that is on disk: a write that failed (a full disk) kept the previous
  // ones, and stopping now would lose the steps since them.
  at::Tensor written = at::full({1}, comm_->rank() == 0 && last_written_ ? 1.0 : 0.0, at::kDouble);
  comm_->broadcast(written, 0);
  if (written.item<double>() <= 0) {
    if (comm_->rank() == 0)
      std::cerr << "nano: not stopping at step " << steps_ << " as nano-run asked: its checkpoint was not written"
                << std::endl;
    return;
  }
  if (comm_->rank() == 0)
    std::cerr << "nano: stopping at the checkpoint of step " << steps_
              << ", as nano-run asked: the world changes at this step" << std::endl;
  stop_at_checkpoint();
}

void Checkpointer::save() {
  // Each rank's default generator state goes to rank 0 (gather carries doubles).
  at::Tensor state;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  const int64_t n = state.numel();
  const uint8_t* bytes = state.data_ptr<uint8_t>();
  std::vector<double> mine(bytes, bytes + n);
  const std::vector<double> all = comm_->gather(mine);
  last_save_ = std::chrono::steady_clock::now();
  const std::string path = dir_ + "/" + checkpoint_file_name(steps_);
  last_path_ = path;
  last_written_ = false;
  if (comm_->rank() != 0 || in_tuning_trial()) return;
  throw_if_lost();

  // The training thread copies; building the archive, serialising, checksumming and writing are
  // the writer's.
  std::vector<std::pair<std::string, StagedWrite>> staged;
  // The staging buffers of the previous checkpoint are reused: its write must be over.
  wait_writer();
  for (const Entry& e : entries_) staged.emplace_back(e.name, e.stage());
  std::vector<std::pair<std::string, at::Tensor>> labels;
  for (const Label& l : labels_) labels.emplace_back(label_key(l.name), bytes_of(l.value));
  at::Tensor rng = at::empty({comm_->size(), n}, at::kByte);
  std::transform(all.begin(), all.end(), rng.data_ptr<uint8_t>(), [](double v) { return static_cast<uint8_t>(v); });
  writing_->store(true);
  if (!writer_) {
    writer_ = std::make_unique<SerialExecutor>();
    // A batch thread: its wake-up does not preempt training (nor the rest of this hold) on the
    // core it lands on; it still gets its fair share of the machine to write.
    writer_->submit([] {
      sched_param none{};
      sched_setscheduler(0, SCHED_BATCH, &none);
    });
  }
  written_ = writer_->submit([staged = std::move(staged), labels = std::move(labels), rng, step = steps_,
                              world = comm_->size(), keep = options_.keep, writing = writing_, folder = folder_,
                              claim = claim_check_, report = report_]() mutable {
    try {
      torch::serialize::OutputArchive archive;
      for (auto& [name, write] : staged) {
        torch::serialize::OutputArchive sub(archive.compilation_unit());
        write(sub);
        archive.write(name, sub);
      }
      staged.clear();  // the copies go as soon as they are in the archive
      for (const auto& [key, bytes] : labels) archive.write(key, bytes);
      archive.write("nano|steps", at::full({1}, step, at::kLong));
      archive.write("nano|rng", rng);
      std::ostringstream payload;
      archive.save_to(payload);
      const std::string body = payload.str();
      // The folder is still this job's before anything is written into it or deleted from it:
      // a job that lost its claim stops writing (the training thread ends the job).
      if (claim) claim();
      const std::string name = folder->write(step, world, TORCH_VERSION, body.data(), body.size());
      report->set_written(folder->dir() + "/" + name);
      std::vector<CheckpointEntry> seen;
      folder->prune(keep, claim, &seen);
      folder->tell(seen);  // what the folder holds besides: each named once
    } catch (const ClaimLost& e) {
      report->set_lost(e.what());
    } catch (const std::exception& e) {
      std::cerr << e.what() << "; the previous checkpoints are kept and training goes on" << std::endl;
    }
    writing->store(false);
  });
}

std::optional<int64_t> Checkpointer::restore() {
  wait_writer();
  // Rank 0 chooses (every file looked at once, the rest named in one line and left alone); every
  // rank opens that file by name and checks it is the one whose seal rank 0 checked (a stale copy
  // on a cached file system is refused rather than resumed from), and loads it as its chunks
  // verify. A file found damaged as it was loaded (on any rank) is named and passed over for the
  // one before it.
  // Rank 0 writes through the folder it opened at construction; a reader opens it here.
  const auto open_folder = [this] {
    if (!folder_)
      folder_ = std::make_shared<CheckpointFolder>(dir_, kCppCheckpoints, CheckpointFolder::Role::kReader,
                                                   options_.shared_folder);
  };
  for (;;) {
    CheckpointChoice choice;
    if (comm_->rank() == 0) {
      try {
        open_folder();
      } catch (const UsageError&) {
        // a tuning trial's rank 0 (which makes nothing): a folder that is not there holds nothing
      }
      if (folder_) choice = folder_->choose();
    }
    constexpr int64_t kNameAt = 0, kSealAt = 48, kRefusedAt = 112, kChoiceBytes = 113;
    at::Tensor chosen = at::zeros({kChoiceBytes}, at::kByte);
    auto* c = chosen.data_ptr<uint8_t>();
    std::copy(choice.name.begin(), choice.name.end(), c + kNameAt);
    std::copy(choice.seal.begin(), choice.seal.end(), c + kSealAt);
    c[kRefusedAt] = choice.refused.empty() ? 0 : 1;
    comm_->broadcast(chosen, 0);
    c = chosen.data_ptr<uint8_t>();
    if (c[kRefusedAt]) {
      throw Error(comm_->rank() == 0 ? choice.refused
                                     : "nano: rank 0 refused checkpoint folder " + dir_ + " (its line says why)");
    }
    const std::string name(reinterpret_cast<const char*>(c + kNameAt));
    const std::string seal(reinterpret_cast<const char*>(c + kSealAt), 64);
    if (name.empty()) return std::nullopt;
    std::unique_ptr<CheckpointReader> reader;
    try {
      open_folder();
      reader = folder_->open_verified(name, seal);
    } catch (const Error& e) {
      throw Error("nano: rank " + std::to_string(comm_->rank()) + ": " + first_line(e.what()) +
                  " (every rank must see the checkpoint folder)");
    }
    Loaded loaded = load(*reader);
    at::Tensor damaged = at::full({1}, loaded.damaged.empty() ? 0.0 : 1.0, at::kDouble);
    comm_->all_reduce(damaged, ReduceOp::kSum);
    if (damaged.item<double>() == 0) return apply(loaded);
    if (comm_->rank() == 0)
      folder_->damaged(name, loaded.damaged.empty() ? "a chunk did not verify on another rank" : loaded.damaged);
  }
}

Checkpointer::Loaded Checkpointer::load(CheckpointReader& reader) {
  const std::string& path = reader.name();  // the folder's and the file's
  Loaded out;
  // The damaged chunk, when one is why reading failed; else the failure as the user should read it.
  const auto failed = [&](const std::string& why) {
    // Every chunk checked first: a rank must not call the same bytes damaged where another calls
    // them unreadable only because its threads had not reached the damaged chunk yet.
    try {
      reader.wait_verified();
    } catch (const Error&) {
      // said by why_damaged()
    }
    out.damaged = reader.why_damaged();
    if (out.damaged.empty()) throw Error("nano: checkpoint " + path + " does not fit what is tracked: " + why);
    return out;
  };
  try {
    torch::serialize::InputArchive archive;
    // Straight from the file, in the pieces the archive asks for, each once its chunk verified:
    // the payload is never held whole in memory besides the tensors it becomes.
    const uint64_t bytes = reader.header().bytes;
    archive.load_from([&reader](uint64_t at, void* buffer, size_t n) { return reader.read(at, buffer, n); },
                      [bytes] { return static_cast<size_t>(bytes); });
    for (const Label& l : labels_) {
      at::Tensor saved;
      const std::string there = archive.try_read(label_key(l.name), saved) ? text_of(saved) : l.missing;
      if (there != l.value)
        throw Error("it was written with " + l.name + " \"" + there + "\", and this run has " + l.name + " \"" +
                    l.value + "\" (resume with the same " + l.name + ", or use another folder)");
    }
    for (const Entry& e : entries_) {
      torch::serialize::InputArchive sub;
      if (!archive.try_read(e.name, sub)) throw Error("it has no '" + e.name + "'");
      out.apply.push_back(e.load(sub));
    }
    if (!archive.try_read("nano|rng", out.rng) || !archive.try_read("nano|steps", out.steps))
      throw Error("it has no step or RNG state");
    reader.wait_verified();  // the chunks nothing read as well: the file is whole before anything changes
  } catch (const c10::Error& e) {
    return failed(first_line(e.what_without_backtrace()));
  } catch (const Error& e) {
    return failed(e.what());
  }
  return out;
}

int64_t Checkpointer::apply(Loaded& loaded) {
  for (auto& f : loaded.apply) f();
  // A rank beyond the saved world (resuming with more ranks) takes a saved rank's stream.
  const int64_t row = comm_->rank() % loaded.rng.size(0);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(loaded.rng[row].clone());
  }
  steps_ = loaded.steps.item<int64_t>();
  last_save_ = std::chrono::steady_clock::now();
  return steps_;
}

std::string verify_checkpoint(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  try {
    // Only read: the folder's mode is the writer's concern.
    return CheckpointFolder(dir, kCppCheckpoints, CheckpointFolder::Role::kReader, true)
        .why_not(path.substr(slash == std::string::npos ? 0 : slash + 1));
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace nano
