#include <nano/auto_checkpoint.h>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <iostream>
#include <set>

#include <nano/auto_lr.h>
#include <nano/communicator.h>
#include <nano/error.h>

namespace nano {

struct AutoCheckpoint::State {
  std::string dir;
  std::shared_ptr<Communicator> comm;
  CheckpointOptions options;
  std::unique_ptr<Checkpointer> checkpointer;
  std::function<void(int64_t)> on_restored;
  std::map<int, EpochShardSampler*> loaders;  // live loaders' samplers by creation index
  int next_index = 0;
  bool restore_done = false;
  // The loaders' part of the restored checkpoint, applied to each loader at its first event.
  std::shared_ptr<torch::serialize::InputArchive> saved_loaders;
  std::set<int> applied;
  int64_t backwards = 0;  // steps so far (a restored run starts at the checkpoint's)
  int64_t counted = 0;    // steps the checkpointer has been told of

  static std::string key(int index) { return "loader-" + std::to_string(index); }

  void save_loaders(torch::serialize::OutputArchive& archive) const {
    for (const auto& [index, sampler] : loaders) {
      torch::serialize::OutputArchive one;
      sampler->save(one);
      archive.write(key(index), one);
    }
  }

  void restore() {
    restore_done = true;
    const std::optional<int64_t> step = checkpointer->restore();
    if (!step) return;
    backwards = counted = *step;
    if (comm->rank() == 0) {
      std::cerr << "nano: resuming from checkpoint " << dir << "/" << checkpoint_file_name(*step) << " (step " << *step
                << ")" << std::endl;
    }
    if (on_restored) on_restored(*step);
  }

  void event(int index, EpochShardSampler& sampler, SamplerEvent what) {
    if (what == SamplerEvent::kPassEnd) return;  // its kBatch came first
    if (what == SamplerEvent::kGone) {
      auto it = loaders.find(index);
      if (it != loaders.end() && it->second == &sampler) loaders.erase(it);
      return;
    }
    loaders[index] = &sampler;
    if (!checkpointer) {
      throw UsageError(
          "nano: checkpoint_dir is set, but a loader handed out a batch before setup(model, ...): "
          "set up the model and optimizers first");
    }
    if (!restore_done) restore();
    if (saved_loaders && applied.insert(index).second) {
      torch::serialize::InputArchive one;
      if (saved_loaders->try_read(key(index), one)) {
        sampler.load(one);
        sampler.replay_done_passes();
      }
    }
    // A batch asked for after backwards: the previous steps are complete (the loop fetches the
    // next batch after optimizer.step()), so the state on hand is a clean step boundary.
    if (what == SamplerEvent::kBatch) {
      while (counted < backwards) {
        ++counted;
        checkpointer->step();
      }
    }
  }
};

AutoCheckpoint::AutoCheckpoint(std::string dir, std::shared_ptr<Communicator> comm, CheckpointOptions options)
    : state_(std::make_shared<State>()) {
  prepare_checkpoint_dir(dir, options.shared_folder);
  state_->dir = std::move(dir);
  state_->comm = std::move(comm);
  state_->options = options;
}

AutoCheckpoint::~AutoCheckpoint() = default;

void AutoCheckpoint::track(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers,
                           const std::vector<AutoLr*>& warmups, const std::string& precision,
                           std::function<void(int64_t)> on_restored) {
  State& s = *state_;
  s.checkpointer.reset();  // waits for a write under way
  s.checkpointer = std::make_unique<Checkpointer>(s.dir, s.comm, s.options);
  // First, so that a checkpoint of another precision is refused for that reason, not for the
  // first parameter whose dtype differs. Checkpoints from before it was written were "32".
  s.checkpointer->track_label("precision", precision, "32");
  s.checkpointer->track("model", model);
  for (std::size_t i = 0; i < optimizers.size(); ++i)
    s.checkpointer->track("optimizer-" + std::to_string(i), *optimizers[i]);
  for (std::size_t i = 0; i < warmups.size(); ++i) s.checkpointer->track("warmup-" + std::to_string(i), *warmups[i]);
  std::weak_ptr<State> weak = state_;
  s.checkpointer->track(
      "loaders",
      [weak](torch::serialize::OutputArchive& a) {
        if (auto st = weak.lock()) st->save_loaders(a);
      },
      [weak](torch::serialize::InputArchive& a) {
        if (auto st = weak.lock()) st->saved_loaders = std::make_shared<torch::serialize::InputArchive>(std::move(a));
      },
      Checkpointer::Saved::kValues);  // the samplers write fresh counters
  s.on_restored = std::move(on_restored);
  s.checkpointer->set_steps(s.counted);
}

SamplerHook AutoCheckpoint::loader_hook() {
  std::weak_ptr<State> weak = state_;
  const int index = state_->next_index++;
  return [weak, index](EpochShardSampler& sampler, SamplerEvent what) {
    if (auto st = weak.lock()) st->event(index, sampler, what);
  };
}

void AutoCheckpoint::backward() { ++state_->backwards; }

}  // namespace nano
