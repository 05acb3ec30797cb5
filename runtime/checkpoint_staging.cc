#include "runtime/checkpoint_staging.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <ATen/ATen.h>

#include <sstream>
#include <utility>
#include <vector>

namespace nano {
namespace {

constexpr const char* kBytesKey = "nano|serialised";

// Every state tensor slot of a known libtorch optimizer's parameter state; false for another kind.
bool state_slots(torch::optim::OptimizerParamState& state, std::vector<at::Tensor*>& slots) {
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(&state)) {
    slots.insert(slots.end(), {&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()});
  } else if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(&state)) {
    slots.insert(slots.end(), {&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()});
  } else if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state)) {
    slots.push_back(&s->momentum_buffer());
  } else if (auto* s = dynamic_cast<torch::optim::RMSpropParamState*>(&state)) {
    slots.insert(slots.end(), {&s->square_avg(), &s->momentum_buffer(), &s->grad_avg()});
  } else if (auto* s = dynamic_cast<torch::optim::AdagradParamState*>(&state)) {
    slots.push_back(&s->sum());
  } else {
    return false;
  }
  return true;
}

bool copyable(torch::optim::Optimizer& optimizer, std::vector<at::Tensor*>& slots) {
  for (auto& entry : optimizer.state())
    if (!entry.second || !state_slots(*entry.second, slots)) return false;
  return true;
}

}  // namespace

void save_optimizer_copy(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive,
                         const std::function<void(torch::optim::Optimizer&, torch::serialize::OutputArchive&)>& save_state) {
  std::vector<at::Tensor*> slots;
  if (!copyable(optimizer, slots)) {
    torch::serialize::OutputArchive inner;
    save_state(optimizer, inner);
    write_serialised(archive, inner);
    return;
  }
  // The archive refers to the tensors it is given: for the moment of the save, each slot holds
  // a copy, which the archive keeps; then the live tensors go back.
  std::vector<at::Tensor> live;
  live.reserve(slots.size());
  {
    at::NoGradGuard no_grad;
    for (at::Tensor* slot : slots) {
      live.push_back(*slot);
      if (slot->defined()) *slot = slot->clone();
    }
  }
  try {
    save_state(optimizer, archive);
  } catch (...) {
    for (std::size_t i = 0; i < slots.size(); ++i) *slots[i] = live[i];
    throw;
  }
  for (std::size_t i = 0; i < slots.size(); ++i) *slots[i] = live[i];
}

void write_serialised(torch::serialize::OutputArchive& archive, torch::serialize::OutputArchive& inner) {
  std::ostringstream bytes;
  inner.save_to(bytes);
  const std::string text = bytes.str();
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), t.data_ptr<uint8_t>());
  archive.write(kBytesKey, t, /*is_buffer=*/true);
}

std::unique_ptr<torch::serialize::InputArchive> read_serialised(torch::serialize::InputArchive& archive) {
  at::Tensor bytes;
  if (!archive.try_read(kBytesKey, bytes, /*is_buffer=*/true)) return nullptr;
  auto inner = std::make_unique<torch::serialize::InputArchive>();
  const auto* p = bytes.data_ptr<uint8_t>();
  std::istringstream in(std::string(p, p + bytes.numel()));
  inner->load_from(in);
  return inner;
}

int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor*> slots;
  for (auto& entry : optimizer.state())
    if (entry.second) state_slots(*entry.second, slots);
  int64_t bytes = 0;
  for (at::Tensor* slot : slots)
    if (slot->defined()) bytes += static_cast<int64_t>(slot->nbytes());
  return bytes;
}

}  // namespace nano
