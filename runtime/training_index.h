#pragma once
// How many in-program trainings (TorchNano, nano()) this process has reached. A re-executed rank
// must run the same training its caller launched: the caller passes its index to the ranks
// (NANO_IN_PROGRAM), and each rank checks it against its own count when it reaches one.
namespace nano {
namespace in_program {

/// Counts one more training reached by this process; returns its index (1, 2, ...).
int reach_next_training();

/// The index of the last training this process reached (0 = none yet).
int trainings_reached();

}  // namespace in_program
}  // namespace nano
