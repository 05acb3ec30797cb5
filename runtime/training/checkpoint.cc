#include <nano/checkpoint.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/version.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include <nano/auto_lr.h>
#include <nano/communicator.h>
#include <nano/error.h>
#include "core/job_secret.h"
#include "runtime/collectives/serial_executor.h"
#include "runtime/folder_claim/folder_claim.h"
#include "runtime/rendezvous/rendezvous.h"  // first_line
#include "runtime/timeline/recorder.h"
#include "runtime/timeline/step_report.h"
#include "runtime/training/checkpoint_format.h"
#include "runtime/training/checkpoint_staging.h"
#include "runtime/training/checkpoint_stop.h"
#include "runtime/training/durable_file.h"

namespace nano {

namespace {

std::string errno_text() { return strerror(errno); }

// The folder was taken by another job: what the writer hands the training thread, apart from a
// write that failed (a full disk), after which training goes on.
class ClaimLost : public Error {
 public:
  using Error::Error;
};

// A damaged file where a checkpoint is about to be written (a resumed run saving a step again):
// renamed aside, said in one line, never replaced unseen.
void set_aside_if_damaged(const std::string& path, CheckpointVerdicts& verdicts) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;
  const std::string why = verdicts.why_not(path);
  if (why.empty()) return;
  const std::string aside = path + ".damaged-" + hex_of(make_challenge()).substr(0, 8);
  if (rename(path.c_str(), aside.c_str()) == 0)
    std::cerr << "nano: checkpoint " << path << " is damaged (" << why << "): kept as " << aside
              << ", and this run's checkpoint of that step written in its place" << std::endl;
}

}  // namespace

/// Why this job may no longer write into its folder, set by the writer, read by the training
/// thread (which ends the job with it).
struct Checkpointer::LostClaim {
  std::mutex mutex;
  std::string why;
  void set(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    if (why.empty()) why = text;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mutex);
    return why;
  }
};

void prepare_checkpoint_dir(const std::string& dir) {
  if (dir.empty()) throw UsageError("nano: the checkpoint folder is empty");
  if (in_tuning_trial()) return;  // a trial makes nothing of the user's (nor writes there)
  std::error_code failed;
  std::filesystem::create_directories(dir, failed);
  struct stat st {};
  if (failed && stat(dir.c_str(), &st) != 0)
    throw UsageError("nano: cannot create checkpoint folder " + dir + ": " + failed.message());
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UsageError("nano: checkpoint folder " + dir + " is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("nano: cannot write into checkpoint folder " + dir + ": " + errno_text());
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
      lost_(std::make_shared<LostClaim>()) {
  if (dir_.empty()) throw UsageError("nano: the checkpoint folder is empty");
  planned_stops_on();  // the signal's handler, before a loader's threads start
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (options_.keep < 1)
    throw UsageError("nano: checkpoint keep must be at least 1, got " + std::to_string(options_.keep));
  if (options_.every_steps < 0)
    throw UsageError("nano: checkpoint every_steps must be >= 0, got " + std::to_string(options_.every_steps));
  if (!(options_.every_seconds >= 0))
    throw UsageError("nano: checkpoint every_seconds must be >= 0, got " + std::to_string(options_.every_seconds));
  if (comm_->rank() == 0) verdicts_ = std::make_shared<CheckpointVerdicts>();  // restore() reads, also in a trial
  // A tuning trial leaves the user's folder as it is: not made, not cleaned, never written.
  if (comm_->rank() == 0 && !in_tuning_trial()) {
    prepare_checkpoint_dir(dir_);
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
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d))
        if (std::string(e->d_name).rfind(".tmp-", 0) == 0) unlink((dir_ + "/" + e->d_name).c_str());
      closedir(d);
    }
  }
}

Checkpointer::~Checkpointer() {
  wait_writer();  // then the claim goes, with the last write done
  if (const std::string why = lost_->get(); !why.empty()) std::cerr << why << std::endl;
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
  if (const std::string why = lost_->get(); !why.empty()) throw Error(why);
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

// A planned stop (runtime/training/checkpoint_stop.h): every rank learns whether any was asked,
// and all stop together once the checkpoint just saved is on disk.
void Checkpointer::stop_if_asked() {
  at::Tensor asked = at::full({1}, stop_asked() ? 1.0 : 0.0, at::kDouble);
  comm_->all_reduce(asked, ReduceOp::kSum);
  if (asked.item<double>() <= 0) return;
  wait();  // rank 0: the write is over (throws when the folder was taken)
  // Only at a checkpoint that is on disk: a write that failed (a full disk) kept the previous
  // ones, and stopping now would lose the steps since them.
  at::Tensor written =
      at::full({1}, comm_->rank() == 0 && ::access(last_path_.c_str(), F_OK) == 0 ? 1.0 : 0.0, at::kDouble);
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
  written_ = writer_->submit([dir = dir_, path, staged = std::move(staged), labels = std::move(labels), rng,
                              step = steps_, world = comm_->size(), keep = options_.keep, writing = writing_,
                              verdicts = verdicts_, claim = claim_check_, lost = lost_]() mutable {
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
      set_aside_if_damaged(path, *verdicts);
      write_durable(dir, path, checkpoint_header(step, world, TORCH_VERSION, body) + body);
      verdicts->written(path);
      std::vector<CheckpointFile> files;
      for (const auto& [s, file] : list_checkpoints(dir)) files.push_back({s, file, verdicts->why_not(file).empty()});
      const std::vector<std::string> old = checkpoints_to_prune(files, keep);
      if (!old.empty()) {
        if (claim) claim();
        for (const std::string& file : old) unlink(file.c_str());
        sync_folder(dir);
      }
    } catch (const ClaimLost& e) {
      lost->set(e.what());
    } catch (const std::exception& e) {
      std::cerr << e.what() << "; the previous checkpoints are kept and training goes on" << std::endl;
    }
    writing->store(false);
  });
}

std::optional<int64_t> Checkpointer::restore() {
  wait_writer();
  int64_t step = -1;
  if (comm_->rank() == 0) {
    // Every file is looked at once, here: the newest whole one is resumed from, and the damaged
    // ones are named in one line and left alone (pruning never counts nor deletes them).
    std::vector<std::string> damaged;
    for (const auto& [s, path] : list_checkpoints(dir_)) {
      const std::string why = verdicts_->why_not(path);
      if (!why.empty())
        damaged.push_back(path.substr(path.rfind('/') + 1) + " (" + why + ")");
      else if (step < 0)
        step = s;
    }
    if (!damaged.empty()) {
      std::string names;
      for (const auto& d : damaged) names += (names.empty() ? "" : ", ") + d;
      std::cerr << "nano: " << damaged.size() << " damaged checkpoint file" << (damaged.size() == 1 ? "" : "s")
                << " in " << dir_ << ", left in place and never counted as kept: " << names << std::endl;
    }
    // Said apart from the damaged files: a run that trains from scratch over a folder of
    // checkpoints is a surprise worth one line of its own.
    if (step < 0 && !damaged.empty())
      std::cerr << "nano: no usable checkpoint in " << dir_ << " (" << damaged.size() << " damaged, skipped)"
                << ": training starts from step 0" << std::endl;
  }
  // The step and its header's checksum: a rank that sees another file under that name (a stale
  // copy on a cached file system) refuses it rather than resume from other state than rank 0.
  uint64_t sum = 0;
  if (comm_->rank() == 0 && step >= 0) sum = CheckpointReader(dir_ + "/" + checkpoint_file_name(step)).header().sum;
  at::Tensor chosen = at::empty({2}, at::kLong);
  chosen[0] = step;
  chosen[1] = static_cast<int64_t>(sum);
  comm_->broadcast(chosen, 0);
  step = chosen[0].item<int64_t>();
  sum = static_cast<uint64_t>(chosen[1].item<int64_t>());
  if (step < 0) return std::nullopt;
  const std::string path = dir_ + "/" + checkpoint_file_name(step);
  std::unique_ptr<CheckpointReader> reader;
  try {
    reader = std::make_unique<CheckpointReader>(path);
  } catch (const Error& e) {
    throw Error("nano: rank " + std::to_string(comm_->rank()) + " " + e.what() +
                " (every rank must see the checkpoint folder)");
  }
  if (reader->header().sum != sum)
    throw Error("nano: rank " + std::to_string(comm_->rank()) + " reads another checkpoint " + path +
                " than rank 0 (its checksum differs): every rank must see the same checkpoint folder");
  std::vector<std::function<void()>> apply;
  at::Tensor rng, steps;
  try {
    torch::serialize::InputArchive archive;
    // Straight from the file, in the pieces the archive asks for: the payload is never held
    // whole in memory besides the tensors it becomes.
    const uint64_t bytes = reader->header().bytes;
    archive.load_from([&reader](uint64_t at, void* buffer, size_t n) { return reader->read(at, buffer, n); },
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
      apply.push_back(e.load(sub));
    }
    if (!archive.try_read("nano|rng", rng) || !archive.try_read("nano|steps", steps))
      throw Error("it has no step or RNG state");
  } catch (const c10::Error& e) {
    throw Error("nano: checkpoint " + path +
                " does not fit what is tracked: " + first_line(e.what_without_backtrace()));
  } catch (const Error& e) {
    throw Error("nano: checkpoint " + path + " does not fit what is tracked: " + e.what());
  }
  for (auto& f : apply) f();
  // A rank beyond the saved world (resuming with more ranks) takes a saved rank's stream.
  const int64_t row = comm_->rank() % rng.size(0);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng[row].clone());
  }
  steps_ = steps.item<int64_t>();
  last_save_ = std::chrono::steady_clock::now();
  return steps_;
}

}  // namespace nano
