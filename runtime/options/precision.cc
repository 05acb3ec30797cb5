#include <nano/precision.h>

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <fstream>
#include <sstream>

#include "core/setting.h"

namespace nano {

Precision parse_precision(const std::string& text) {
  if (text == "32") return Precision::kFloat32;
  if (text == "64") return Precision::kFloat64;
  if (text == "bf16") return Precision::kBfloat16;
  if (text == "16")
    throw SettingError(Setting::kPrecision, text,
                       "{precision} \"16\" (float16) is not supported on CPUs: use \"bf16\", the half-width type "
                       "CPUs compute in");
  throw SettingError(Setting::kPrecision, text,
                     "unknown {precision} \"" + text + "\": expected \"32\", \"64\" or \"bf16\"");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32: return "32";
    case Precision::kFloat64: return "64";
    case Precision::kBfloat16: return "bf16";
  }
  return "?";
}

BatchFormat batch_format(Precision precision, bool channels_last) {
  BatchFormat f;
  if (precision == Precision::kFloat64) f.floating = at::kDouble;
  f.channels_last = channels_last;
  return f;
}

at::Tensor formatted(const at::Tensor& tensor, const BatchFormat& format) {
  if (!tensor.defined() || format.identity()) return tensor;
  at::Tensor t = tensor;
  if (format.floating != at::ScalarType::Undefined && t.is_floating_point() && t.scalar_type() != format.floating)
    t = t.to(format.floating);
  if (format.channels_last && t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
  return t;
}

void format_module(torch::nn::Module& module, Precision precision, bool channels_last) {
  const BatchFormat f = batch_format(precision, channels_last);
  if (f.identity()) return;
  at::NoGradGuard no_grad;
  auto convert = [&](at::Tensor& t) {
    at::Tensor changed = formatted(t, f);
    if (changed.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return;
    // A gradient of the old dtype could not accumulate into the new one.
    if (t.grad().defined() && t.grad().scalar_type() != changed.scalar_type()) t.mutable_grad() = at::Tensor();
    t.set_data(changed);
  };
  for (auto& p : module.parameters(/*recurse=*/true)) convert(p);
  for (auto& b : module.buffers(/*recurse=*/true)) convert(b);
}

// libtorch 2.4 made autocast's state per device type (set_autocast_enabled(at::kCPU, ...));
// 1.13 has CPU-specific functions (set_cpu_enabled, set_autocast_cpu_dtype). Debian 12 ships
// 1.13, Debian 13 ships 2.6.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
namespace {
bool cpu_enabled() { return at::autocast::is_autocast_enabled(at::kCPU); }
void set_cpu_enabled(bool on) { at::autocast::set_autocast_enabled(at::kCPU, on); }
at::ScalarType cpu_dtype() { return at::autocast::get_autocast_dtype(at::kCPU); }
void set_cpu_dtype(at::ScalarType t) { at::autocast::set_autocast_dtype(at::kCPU, t); }
}  // namespace
#else
namespace {
bool cpu_enabled() { return at::autocast::is_cpu_enabled(); }
void set_cpu_enabled(bool on) { at::autocast::set_cpu_enabled(on); }
at::ScalarType cpu_dtype() { return at::autocast::get_autocast_cpu_dtype(); }
void set_cpu_dtype(at::ScalarType t) { at::autocast::set_autocast_cpu_dtype(t); }
}  // namespace
#endif

AutocastScope::AutocastScope(bool enable) : active_(enable) {
  if (!active_) return;
  was_enabled_ = cpu_enabled();
  was_dtype_ = cpu_dtype();
  was_caching_ = at::autocast::is_autocast_cache_enabled();
  set_cpu_dtype(at::kBFloat16);
  at::autocast::set_autocast_cache_enabled(false);
  set_cpu_enabled(true);
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  set_cpu_enabled(was_enabled_);
  set_cpu_dtype(was_dtype_);
  at::autocast::set_autocast_cache_enabled(was_caching_);
  at::autocast::clear_cache();
}

bool cpu_autocast_enabled() { return cpu_enabled(); }

bool cpuinfo_has_bf16(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1));
    std::string word;
    while (words >> word)
      if (word == "avx512_bf16" || word == "amx_bf16") return true;
    return false;  // every CPU lists the same flags: the first line decides
  }
  return false;
}

bool cpu_has_bf16() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  return cpuinfo_has_bf16(text.str());
}

}  // namespace nano
