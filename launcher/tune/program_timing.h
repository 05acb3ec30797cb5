#pragma once
// How `nano-run --tune` and -n auto time a program that does not print its own throughput:
// reading the program (its binary, or a Python program's script and arguments) for nano's
// runtime, whose step reports count its steps, or for the nano torch backend, whose
// all-reduces do.
#include <string>
#include <vector>

namespace nano {

/// How nano can time a program without its help.
enum class ProgramTiming {
  kRuntime,       ///< it links nano's runtime (its DDP steps and sharded loader report themselves)
  kTorchBackend,  ///< a Python program on the nano torch backend (its all-reduces report themselves)
  kNone,          ///< neither: it needs --tune-metric
};

/// Whether a Python program's text (its script or -c code) or its arguments ("--backend nano")
/// name the nano backend: "nano_torch", or "nano" quoted or as an argument of its own. Pure.
bool names_nano_backend(const std::string& source, const std::vector<std::string>& arguments);

/// Reads the program (argv[0], resolved on PATH) to see whether it links nano's runtime, or,
/// for a Python interpreter, its script (or -c code) and arguments for the nano backend.
ProgramTiming program_timing(const std::vector<std::string>& argv);

}  // namespace nano
