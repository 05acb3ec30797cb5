#include "runtime/options/in_program_options.h"

#include <chrono>
#include <iostream>

#include <nano/in_program.h>
#include "core/setting.h"
#include "core/setting_list.h"
#include "runtime/checkpoint_files/checkpoint_folder.h"

namespace nano {

CheckpointOptions checkpoint_options_of(const TorchNanoOptions& o) {
  check_checkpoint_settings(o.checkpoint_every_steps, o.checkpoint_every_seconds, o.checkpoint_keep);
  CheckpointOptions c;
  c.every_steps = o.checkpoint_every_steps;
  c.every_seconds =
      o.checkpoint_every_steps == 0 && o.checkpoint_every_seconds == 0 ? 300.0 : o.checkpoint_every_seconds;
  c.keep = o.checkpoint_keep;
  c.shared_folder = o.checkpoint_shared_folder;
  return c;
}

namespace in_program {
namespace {

// One setting every front end honours (core/setting_list.h), from TorchNanoOptions' field into
// LaunchOptions': a duration is a count of milliseconds there, anything else the same value.
void from_program(std::chrono::milliseconds& launch, int ms) { launch = std::chrono::milliseconds(ms); }
template <class T>
void from_program(T& launch, const T& program) {
  launch = program;
}

}  // namespace

LaunchOptions launch_options_of(const TorchNanoOptions& o) {
  LaunchOptions l;
  l.front_end = FrontEnd::kProgram;
  if (o.distributed_backend == "fork")
    throw SettingError(Setting::kBackend, o.distributed_backend,
                       "{backend} \"fork\" is not supported (forking after libtorch has started its thread pools "
                       "is unsafe); use \"subprocess\" or \"mpi\"");
  if (o.distributed_backend == "mpi")
    l.backend = LaunchBackend::kMpi;
  else if (o.distributed_backend == "subprocess")
    l.backend = LaunchBackend::kSubprocess;
  else
    throw SettingError(Setting::kBackend, o.distributed_backend,
                       "unknown {backend} \"" + o.distributed_backend + "\": expected \"subprocess\" or \"mpi\"");
  if (communicator_of(o) == CommBackend::kMpi && l.backend != LaunchBackend::kMpi)
    throw SettingError(Setting::kCommunicator, o.communicator,
                       "{communicator} \"mpi\" needs {backend} \"mpi\" (MPI ranks are started by mpirun), got \"" +
                           o.distributed_backend + "\"");
  // 0 means "not given" to the planner; TorchNano's default is 1, so a 0 here was asked for (a
  // negative count is the launch's own check).
  if (o.num_processes == 0) check_num_processes(0);
  // kAuto: the tuned count is filled in just before the launch (in_program::with_tuned_layout).
  l.plan.num_processes = o.num_processes == kAuto ? 0 : o.num_processes;
  l.plan.cpu_for_each_process = o.cpu_for_each_process;
#define NANO_FROM_PROGRAM(id, key, flag, field, member, metavar, docs, help) from_program(l.member, o.field);
  NANO_SHARED_SETTINGS(NANO_FROM_PROGRAM)
#undef NANO_FROM_PROGRAM
  return l;
}

Precision precision_of(const TorchNanoOptions& o) { return parse_precision(o.precision); }

CommBackend communicator_of(const TorchNanoOptions& o) {
  if (o.communicator == "auto") return CommBackend::kAuto;
  if (o.communicator == "mpi") return CommBackend::kMpi;
  if (o.communicator == "gloo") return CommBackend::kGloo;
  throw SettingError(Setting::kCommunicator, o.communicator,
                     "unknown {communicator} \"" + o.communicator + "\": expected \"auto\", \"mpi\" or \"gloo\"");
}

void warn_if_slow_bf16() {
  if (cpu_has_bf16()) return;
  std::cerr << "nano: warning: precision \"bf16\" on a CPU without AVX512-BF16 or AMX: bfloat16 is emulated in "
               "float32 instructions here, and training is usually slower than with \"32\""
            << std::endl;
}

std::string program_message(const std::exception& error) { return "nano: " + worded(error, program_field); }

}  // namespace in_program
}  // namespace nano
