#pragma once
// A Gloo TCP device where runtime/collectives/gloo_binding.h says (for the Gloo communicator, which links
// Gloo; the torch backend makes its device through torch's Python binding instead).
#include <memory>

#include "runtime/collectives/gloo_binding.h"

namespace gloo {
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace nano {

/// The device bound to `where.interface` when set, else to `where.hostname`.
std::shared_ptr<::gloo::transport::Device> make_gloo_device(const GlooBinding& where);

}  // namespace nano
