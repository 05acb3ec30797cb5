#pragma once
// The in-program launch options of the Fashion-MNIST nano examples, from their command line.
// Header-only: nano::examples_common does not link the runtime, the nano programs do.
#include <algorithm>
#include <cstdint>
#include <string>

#include <nano/context.h>
#include <nano/torch_nano_options.h>
#include "examples/common/options.h"
#include "examples/common/train.h"

namespace nano::examples {

/// auto_lr's warm-up length in epochs: the rate climbs from --lr to N x --lr over this many
/// epochs (measured: see fashion_mnist_nano.cc).
inline constexpr int64_t kFashionMnistWarmupEpochs = 1;

static_assert(kAutoProcesses == kAuto, "--num-processes auto is TorchNanoOptions' kAuto");

/// The number of ranks this run will train with: the outer world's size under nano-run or
/// mpirun, else --num-processes (1 for auto: only the launching caller sees that, and it does
/// not train; its ranks see their world).
inline int planned_world_size(const ExampleOptions& o) {
  const Context outer = context_from_env(current_environment());
  if (outer.world_size > 1) return outer.world_size;
  return o.num_processes == kAutoProcesses ? 1 : o.num_processes;
}

/// "2 ranks", or "the tuned layout's ranks" for --num-processes auto (in the caller).
inline std::string ranks_text(const ExampleOptions& o, int world_size) {
  if (o.num_processes == kAutoProcesses && context_from_env(current_environment()).world_size <= 1)
    return "the tuned layout's ranks";
  return std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks");
}

/// Steps per epoch of each rank: its shard of `examples` (padded to equal size) in batches,
/// capped at --max-steps-per-epoch.
inline int64_t rank_steps_per_epoch(const ExampleOptions& o, int64_t examples, int world_size) {
  const int64_t shard = (examples + world_size - 1) / world_size;
  return batches_per_epoch(shard, o.batch_size, o.max_steps_per_epoch);
}

/// --num-processes, --backend, --no-auto-lr, --equal-batches, --max-restarts, --checkpoint-dir,
/// --checkpoint-every, --precision, --channels-last and --bf16-gradients as nano::TorchNanoOptions; auto_lr warms the
/// rate up over kFashionMnistWarmupEpochs epochs of `steps_per_epoch` steps.
inline TorchNanoOptions fashion_mnist_nano_options(const ExampleOptions& o, int64_t steps_per_epoch) {
  TorchNanoOptions n;
  n.num_processes = o.num_processes;
  n.distributed_backend = o.backend;
  AutoLrOptions lr;
  lr.enabled = o.auto_lr;
  lr.warmup_epochs = kFashionMnistWarmupEpochs;
  lr.steps_per_epoch = std::max<int64_t>(steps_per_epoch, 1);
  n.auto_lr = lr;
  n.balance_batches = o.balance;
  n.max_restarts = o.max_restarts;
  n.timeline = o.timeline;
  n.checkpoint_dir = o.checkpoint_dir;
  n.checkpoint_every_steps = o.checkpoint_every;
  n.checkpoint_keep = o.checkpoint_keep;
  n.precision = o.precision;
  n.channels_last = o.channels_last;
  n.ddp.bf16_gradient_exchange = o.bf16_gradients;
  return n;
}

}  // namespace nano::examples
