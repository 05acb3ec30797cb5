#pragma once
// Staging a checkpoint for the background writer: what a tracked object writes into the
// checkpoint's archive must be values that no later training step changes, because the archive
// is serialised on the writer's thread while training goes on. These helpers make such values
// of optimizers and of opaque objects; the Checkpointer clones parameters and tensors itself.
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <memory>

namespace nano {

/// Writes `save_state`'s archive of `optimizer` into `archive` with copies of the state
/// tensors: for libtorch's SGD, Adam, AdamW, RMSprop and Adagrad each state tensor is cloned
/// (the live ones are put back before this returns); any other optimizer's state is serialised
/// here, into bytes (see write_serialised).
void save_optimizer_copy(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive,
                         const std::function<void(torch::optim::Optimizer&, torch::serialize::OutputArchive&)>& save_state);

/// Serialises `inner` now and writes its bytes into `archive` (one uint8 tensor): a snapshot
/// of whatever `inner` refers to, for objects whose save() may write live tensors.
void write_serialised(torch::serialize::OutputArchive& archive, torch::serialize::OutputArchive& inner);

/// The archive that `archive` holds as bytes (write_serialised), or null when it holds none
/// (it is the object's archive itself).
std::unique_ptr<torch::serialize::InputArchive> read_serialised(torch::serialize::InputArchive& archive);

/// Bytes of `optimizer`'s state tensors (what a checkpoint copies of it; the benchmark's
/// plain-copy reference).
int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer);

}  // namespace nano
