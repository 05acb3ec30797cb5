#pragma once
// Numeric precision and memory layout of in-program training (TorchNanoOptions::precision and
// ::channels_last, BigDL-Nano's `precision` and `channels_last`): what the model and the
// batches of nano's loaders are converted to, and the CPU autocast scope of mixed bfloat16.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>

namespace nano {

/// TorchNanoOptions::precision, parsed.
enum class Precision {
  kFloat32,   ///< "32": libtorch's default; nothing is converted
  kFloat64,   ///< "64": the model's floating parameters and buffers, and the floating tensors of
              ///< nano's loaders' batches, become float64
  kBfloat16,  ///< "bf16": mixed precision; the training code after setup() runs under CPU
              ///< autocast to bfloat16 (forward and loss), while the weights, the gradients and
              ///< the optimizers' state stay float32
};

/// Pure: "32", "64" or "bf16". Throws SettingError (Setting::kPrecision) naming the value;
/// "16" (float16) is refused with the reason: libtorch has no CPU autocast to float16 in 1.13,
/// and bfloat16 is the half-width type CPUs compute in.
Precision parse_precision(const std::string& text);

/// "32", "64" or "bf16".
const char* precision_name(Precision precision);

/// How nano's loaders hand out their batches.
struct BatchFormat {
  /// Floating tensors are converted to this dtype; Undefined = left as they are.
  at::ScalarType floating = at::ScalarType::Undefined;
  bool channels_last = false;  ///< 4-D tensors in channels-last memory format
  bool identity() const { return floating == at::ScalarType::Undefined && !channels_last; }
};

/// Pure: the batch format of a training in `precision`, with or without channels-last.
/// (Mixed bfloat16 leaves the inputs float32: autocast casts them where it pays.)
BatchFormat batch_format(Precision precision, bool channels_last);

/// `tensor` in `format` (itself when nothing changes).
at::Tensor formatted(const at::Tensor& tensor, const BatchFormat& format);

/// Converts `module`'s floating parameters and buffers to float64 (kFloat64) and its 4-D ones
/// to channels-last, in place: the parameters stay the same tensors, so optimizers made over
/// them before keep working (their state is made later, in the new dtype).
void format_module(torch::nn::Module& module, Precision precision, bool channels_last);

/// While alive, this thread runs CPU autocast to bfloat16 (`enable`; with false it does
/// nothing), with autocast's weight-cast cache off: nano's scope spans optimizer steps, and a
/// cached bfloat16 copy of a weight would outlive the step that changed the weight. Restores
/// the thread's previous autocast state when it ends. Not copyable.
class AutocastScope {
 public:
  explicit AutocastScope(bool enable);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_;
  bool was_enabled_ = false;
  bool was_caching_ = true;
  at::ScalarType was_dtype_ = at::ScalarType::BFloat16;
};

/// True while this thread runs CPU autocast (as AutocastScope sets it).
bool cpu_autocast_enabled();

/// Pure: whether /proc/cpuinfo's text lists a bfloat16 instruction set (avx512_bf16, amx_bf16).
bool cpuinfo_has_bf16(const std::string& cpuinfo);

/// This machine's answer (reads /proc/cpuinfo; false when it cannot be read).
bool cpu_has_bf16();

}  // namespace nano
