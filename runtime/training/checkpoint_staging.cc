#include "runtime/training/checkpoint_staging.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/serialize.h>
#include <torch/optim/sgd.h>

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <typeinfo>
#include <utility>
#include <vector>

namespace nano {
namespace {

constexpr const char* kBytesKey = "nano|serialised";
// Below this size a tensor is copied with memcpy on the training thread: a copy_() costs a few
// microseconds of dispatch whatever the size, and one large enough for ATen's intra-op threads
// (32768 elements) as much again to wake them, more than its copy at these sizes takes.
constexpr std::size_t kBytewiseBytes = 256 * 1024;

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

namespace {

// An optimizer that holds copies: the param groups (the same parameters, which only name the
// state; their options cloned) and deep copies of the state. Never steps.
class Snapshot : public torch::optim::Optimizer {
 public:
  Snapshot(const torch::optim::Optimizer& live, std::vector<at::Tensor>& buffers)
      : Optimizer(live.param_groups(), live.defaults().clone()) {
    at::NoGradGuard no_grad;
    std::size_t index = 0;
    for (const auto& [key, state] : live.state()) {
      std::unique_ptr<torch::optim::OptimizerParamState> copy = state->clone();  // shares the tensors
      std::vector<at::Tensor*> slots;
      state_slots(*copy, slots);
      for (at::Tensor* slot : slots)
        if (slot->defined()) *slot = staged_copy(*slot, buffers, index++);
      state_[key] = std::move(copy);
    }
  }
  at::Tensor step(LossClosure) override { throw std::logic_error("a checkpoint's optimizer snapshot does not step"); }
  void save(torch::serialize::OutputArchive&) const override {}
  void load(torch::serialize::InputArchive&) override {}
};

template <class State, class Options>
std::function<void(torch::serialize::OutputArchive&)> staged(const torch::optim::Optimizer& live,
                                                             std::vector<at::Tensor>& buffers) {
  auto copy = std::make_shared<Snapshot>(live, buffers);
  return [copy](torch::serialize::OutputArchive& a) { torch::optim::serialize<State, Options>(a, *copy); };
}

}  // namespace

at::Tensor staged_copy(const at::Tensor& t, std::vector<at::Tensor>& buffers, std::size_t index) {
  if (buffers.size() <= index) buffers.resize(index + 1);
  at::Tensor& buffer = buffers[index];
  if (buffer.defined() && buffer.sizes() == t.sizes() && buffer.strides() == t.strides() &&
      buffer.scalar_type() == t.scalar_type()) {
    // A small dense tensor: its bytes at once (a model of many small tensors would otherwise be
    // held mostly by dispatch); a large one through copy_(), on every intra-op thread.
    if (t.nbytes() < kBytewiseBytes && t.is_contiguous() && t.device().is_cpu() && t.layout() == at::kStrided &&
        !t.is_quantized() && !t.is_conj() && !t.is_neg()) {
      std::memcpy(buffer.data_ptr(), t.data_ptr(), t.nbytes());
    } else {
      buffer.copy_(t);
    }
  } else {
    buffer = t.clone();
  }
  return buffer;
}

std::function<void(torch::serialize::OutputArchive&)> stage_optimizer(torch::optim::Optimizer& optimizer,
                                                                      std::vector<at::Tensor>& buffers) {
  std::vector<at::Tensor*> slots;
  if (!copyable(optimizer, slots)) return nullptr;
  // The exact types only: a subclass may save more than its base.
  using namespace torch::optim;
  const std::type_info& type = typeid(optimizer);
  if (type == typeid(Adam)) return staged<AdamParamState, AdamOptions>(optimizer, buffers);
  if (type == typeid(AdamW)) return staged<AdamWParamState, AdamWOptions>(optimizer, buffers);
  if (type == typeid(SGD)) return staged<SGDParamState, SGDOptions>(optimizer, buffers);
  if (type == typeid(RMSprop)) return staged<RMSpropParamState, RMSpropOptions>(optimizer, buffers);
  if (type == typeid(Adagrad)) return staged<AdagradParamState, AdagradOptions>(optimizer, buffers);
  return nullptr;  // a subclass, or one of libtorch's others (LBFGS)
}

at::Tensor serialised_bytes(torch::serialize::OutputArchive& inner) {
  std::ostringstream bytes;
  inner.save_to(bytes);
  const std::string text = bytes.str();
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::copy(text.begin(), text.end(), t.data_ptr<uint8_t>());
  return t;
}

void write_serialised(torch::serialize::OutputArchive& archive, const at::Tensor& bytes) {
  archive.write(kBytesKey, bytes, /*is_buffer=*/true);
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

}  // namespace nano
