#pragma once
// Command-line options shared by the example programs.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace nano::examples {

/// --num-processes auto (in-program launchers): nano::kAuto, the layout tuned for this machine
/// and program (<nano/in_program.h>; the same value, checked in nano_options.h).
inline constexpr int kAutoProcesses = std::numeric_limits<int>::min();

/// The examples' options; the values set before parsing are the defaults.
struct ExampleOptions {
  int epochs = 3;                      ///< --epochs, >= 1
  int64_t batch_size = 64;             ///< --batch-size (per rank), >= 1
  double lr = 1e-3;                    ///< --lr, > 0
  int num_processes = 1;               ///< --num-processes, >= 1 (kAutoProcesses: "auto")
  std::string data_dir;                ///< --data-dir, empty = the dataset's default folder
  int64_t max_steps_per_epoch = 0;     ///< --max-steps-per-epoch, 0 = the whole epoch
  int64_t steps = 100;                 ///< --steps (throughput programs only), >= 1
  int64_t test_limit = 0;              ///< --test-limit: evaluate the first N test images, 0 = all
  bool auto_lr = true;                 ///< --no-auto-lr turns nano's learning-rate warm-up off
  bool balance = true;                 ///< --equal-batches: no splitting of each step's samples by rank speed
  bool step_times = false;             ///< --step-times: the result line also lists each timed step's ms
  std::string backend = "subprocess";  ///< --backend: how --num-processes ranks start (subprocess | mpi)
  std::string checkpoint_dir;          ///< --checkpoint-dir: checkpoint here and resume from here ("" = none)
  int64_t checkpoint_every = 100;      ///< --checkpoint-every: steps between checkpoints, >= 1
  int checkpoint_keep = 2;             ///< --checkpoint-keep: checkpoints kept (the newest that verify), >= 1
  int max_restarts = 0;                ///< --max-restarts (in-program launchers): start failed ranks again
  std::string timeline;                ///< --timeline (in-program launchers): TorchNanoOptions::timeline
  std::string precision = "32";        ///< --precision: 32, 64 or bf16 (TorchNanoOptions::precision)
  bool channels_last = false;          ///< --channels-last: model and 4-D inputs in channels-last format
  bool bf16_gradients = false;         ///< --bf16-gradients: gradients all-reduced as bfloat16
  bool print_weights = false;          ///< --print-weights: print a fingerprint of the trained weights
  int64_t seed = 0;                    ///< --seed: torch's generator seed, so the initial weights
};

/// Which options a program offers.
struct OptionsSpec {
  std::string program;       ///< for --help
  std::string description;   ///< for --help
  bool data_dir = true;      ///< offer --data-dir
  bool epochs = true;        ///< offer --epochs and --max-steps-per-epoch
  bool steps = false;        ///< offer --steps
  bool in_program = false;   ///< offer --no-auto-lr and --backend (programs that launch their own ranks)
                             ///< (--equal-batches, --step-times, --precision, --channels-last and
                             ///< --bf16-gradients are offered with in_program or steps: the
                             ///< data-parallel programs)
  bool checkpoints = false;  ///< offer --checkpoint-dir and --checkpoint-every
};

/// Result of parsing: the options, or the help text when --help was asked for.
struct ParsedOptions {
  ExampleOptions options;
  std::string help;  ///< non-empty: print it and exit 0
};

/// Parses argv (argv[0] is the program) starting from `defaults`. Throws nano::UsageError
/// with one line naming the bad value, e.g. "--epochs must be at least 1, got 0" or
/// "--batch-size: 'abc' is not a valid value", "--backend must be subprocess or mpi, got
/// 'fork'", or for an unknown option.
ParsedOptions parse_example_options(int argc, const char* const* argv, const ExampleOptions& defaults,
                                    const OptionsSpec& spec);

/// The whole main() of an example program: parses argv from `defaults`, prints --help, calls
/// `run`, and turns exceptions into one line "<program>: error: ..." on stderr with exit 2
/// for bad input (nano::UsageError) and 1 for any other failure. Returns the exit code.
int run_example_main(int argc, const char* const* argv, const ExampleOptions& defaults, const OptionsSpec& spec,
                     const std::function<int(const ExampleOptions&)>& run);

/// Checks ranges; throws nano::UsageError as parse_example_options.
void validate_example_options(const ExampleOptions& options);

}  // namespace nano::examples
