#pragma once
// The steps a rank trains, told to `nano-run --tune` without the program printing anything:
// when the launcher sets NANO_TUNE_REPORT (a folder), each rank appends one line per training
// step to FOLDER/rank-R.steps, "SECONDS SAMPLES" (CLOCK_MONOTONIC; SAMPLES 0 when unknown), with
// one write(2) per step. Nothing is written, and nothing is opened, otherwise.
//
// A step ends at each synchronising backward of nano's DDP. A rank without DDP (a world of
// one) is timed from its sharded loader: each batch it hands out ends the step before. The
// samples come from the loader's batches, else from the batch size nano::DDP's forward saw.
// The nano torch backend (a stock PyTorch program) does not see steps: it tells each
// all-reduce, "SECONDS BYTES" in FOLDER/rank-R.collectives, and nano-run finds the steps in
// their sizes' period (launcher/tune/tune_choice.h).
#include <cstddef>

namespace nano {

/// Whether this process is a tuning trial (NANO_TUNE_TRIAL=1): nano's checkpointing writes
/// nothing then, so a trial never touches the user's state.
bool in_tuning_trial();

namespace step_report {

/// A synchronising backward of DDP ended on this rank.
void ddp_step();
/// nano::DDP's forward took a batch of `samples` (added to the step in progress; under no_sync
/// the accumulated forwards' samples count for the step that syncs them).
void forward_samples(long long samples);
/// The sharded loader handed out a batch of `samples`.
void loader_batch(std::size_t samples);
/// The nano torch backend finished an all-reduce of `bytes`.
void all_reduce(std::size_t bytes);

}  // namespace step_report
}  // namespace nano
