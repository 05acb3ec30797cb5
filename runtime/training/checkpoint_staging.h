#pragma once
// Staging a checkpoint for the background writer: the training thread copies what a tracked
// object holds, and the writer builds the archive from the copies, serialises and writes it while
// training goes on. These helpers stage optimizers and opaque objects; the Checkpointer clones
// parameters and tensors itself.
#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace nano {

/// A copy of `t` for the writer, made into `buffers[index]` when that has t's shape, dtype and
/// layout (a staging buffer of the previous checkpoint, whose write is over), else a new clone
/// kept there for the next time.
at::Tensor staged_copy(const at::Tensor& t, std::vector<at::Tensor>& buffers, std::size_t index);

/// A snapshot of `optimizer` for the writer: for libtorch's SGD, Adam, AdamW, RMSprop and
/// Adagrad, a copy of its param groups (their options cloned) and of every state tensor, and the
/// function that writes it into an archive as `optimizer.save()` would, on any thread. Null for
/// another kind of optimizer (serialise it at once instead).
/// `buffers` keeps the state tensors' staging copies from one checkpoint to the next (see
/// staged_copy).
std::function<void(torch::serialize::OutputArchive&)> stage_optimizer(torch::optim::Optimizer& optimizer,
                                                                      std::vector<at::Tensor>& buffers);

/// `inner` serialised now, as bytes (one uint8 tensor): a snapshot of whatever `inner` refers to,
/// for objects whose save() may write live tensors. write_serialised() puts them in an archive.
at::Tensor serialised_bytes(torch::serialize::OutputArchive& inner);
void write_serialised(torch::serialize::OutputArchive& archive, const at::Tensor& bytes);

/// The archive that `archive` holds as bytes (write_serialised), or null when it holds none
/// (it is the object's archive itself).
std::unique_ptr<torch::serialize::InputArchive> read_serialised(torch::serialize::InputArchive& archive);

}  // namespace nano
