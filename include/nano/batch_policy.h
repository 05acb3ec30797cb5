#pragma once
// The global batch policy of an elastic launch (nano-run --batch-policy, docs/multihost.md): when
// a world of N ranks resumes a training begun by N0, "per-rank" keeps each rank's batch (the
// global batch is N times it, and auto_lr's target rate follows N), "global" keeps the first
// world's global batch (each rank takes N0/N times its batch, rounded up, and auto_lr's target
// stays N0's). TorchNano's setup_dataloader, nano() and the Python API apply it; a program of its
// own sizes its loader and its AutoLr with these.
#include <cstddef>

namespace nano {

/// The world size the program's per-rank batch and learning rate were chosen for: under
/// --batch-policy global, the first world's (NANO_BATCH_WORLD_SIZE, core/rank_contract.h); else
/// `world_size`. Throws UsageError naming a NANO_BATCH_WORLD_SIZE that is no count >= 1.
int batch_world_size(int world_size);

/// Pure: the per-rank batch that keeps `batch_size` x `batch_world` samples a step over
/// `world_size` ranks: their quotient, rounded up (the global batch then exceeds the first
/// world's by fewer than world_size samples).
std::size_t per_rank_batch(std::size_t batch_size, int batch_world, int world_size);

}  // namespace nano
