#pragma once
// What a launched rank 0 hands back to its caller, and the file it travels in: the trained
// parameters and buffers by name, the optimizers' state as serialised archives, and the value
// the training function returned. Apart from the launch, so its format is tested on its own
// (tests/runtime/torch_nano_test.cc, "the report").
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include <nano/in_program.h>

namespace nano {
namespace in_program {

/// Rank 0's report.
struct Report {
  /// "p:<name>" for a parameter, "b:<name>" for a buffer, in the model's order.
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;            ///< one per name
  std::vector<std::string> optimizer_states;  ///< one serialised OutputArchive per optimizer
  TrainResult result;
};

/// Writes `report` to `path` (a torch archive). Throws on I/O failure.
void write_report(const std::string& path, const Report& report);

/// Reads what write_report wrote. Throws Error when `path` is missing or empty (rank 0 never
/// reached the training call), c10::Error when it is damaged.
Report read_report(const std::string& path);

}  // namespace in_program
}  // namespace nano
