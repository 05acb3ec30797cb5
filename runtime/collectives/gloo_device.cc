#include "runtime/collectives/gloo_device.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace nano {

std::shared_ptr<::gloo::transport::Device> make_gloo_device(const GlooBinding& where) {
  if (!where.interface.empty()) return c10d::ProcessGroupGloo::createDeviceForInterface(where.interface);
  return c10d::ProcessGroupGloo::createDeviceForHostname(where.hostname);
}

}  // namespace nano
