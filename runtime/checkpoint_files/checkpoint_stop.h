#pragma once
// A planned stop at a checkpoint (core/rank_contract.h, kStopAtCheckpoint): when an elastic
// launch's host comes back (nano-run --rejoin), nano-run sends every rank SIGURG, and nano's
// checkpoints stop the world at the next checkpoint, once it is on disk, so that the world grows
// again at that step without losing a step's work (Checkpointer::step agrees and stops).

namespace nano {

/// Whether the launcher asked for planned stops (NANO_STOP_AT_CHECKPOINT=1). The first call
/// installs the handler of contract::kStopAtCheckpointSignal that notes the ask.
bool planned_stops_on();

/// Whether the signal came to this process.
bool stop_asked();

/// Flushes the timeline's records and the standard streams and ends the process with kStoppedAtCheckpointExitCode at
/// once: no destructors, which other threads (the communicator's, a loader's) may still be using.
[[noreturn]] void stop_at_checkpoint();

}  // namespace nano
