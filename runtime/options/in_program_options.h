#pragma once
// TorchNanoOptions (TorchNano, nano()) translated into the launcher's options, and the
// front end's wording of settings: TorchNanoOptions' own field names behind "nano: ".
#include <exception>
#include <string>

#include <nano/context.h>
#include <nano/precision.h>

#include "launcher/prepare/launch_types.h"

namespace nano {
struct TorchNanoOptions;

namespace in_program {

/// Pure: the one conversion of TorchNanoOptions' launch fields into the launcher's options.
/// Only what only this API can get wrong is checked here: an unknown or "fork"
/// distributed_backend, and communicator "mpi" with ranks that mpirun does not start
/// (SettingError); everything the launch itself checks (num_processes,
/// grace_period_ms, max_restarts, hostfile/hosts without mpi, the plan) is checked by it, once.
LaunchOptions launch_options_of(const TorchNanoOptions& options);

/// Pure: TorchNanoOptions' precision. Throws SettingError naming a bad precision.
Precision precision_of(const TorchNanoOptions& options);

/// Pure: the communicator the ranks ask nano::init() for ("auto" = kAuto: NANO_BACKEND, else
/// MPI under mpirun, else Gloo). Throws SettingError naming a bad communicator.
CommBackend communicator_of(const TorchNanoOptions& options);

/// Says on stderr that precision "bf16" is emulated in float32 instructions on this CPU (no
/// AVX512-BF16 or AMX) and usually slower than "32"; nothing where the CPU has them. Once per
/// job: the caller of an in-program launch, or rank 0 of an outer world's first attempt.
void warn_if_slow_bf16();

/// The message an in-program caller reads for `error` raised by the launch path: "nano: " and
/// the settings named by TorchNanoOptions' fields ("nano: max_restarts must be at least 0, got -1").
std::string program_message(const std::exception& error);

}  // namespace in_program
}  // namespace nano
