#pragma once
// The running program's own path, for starting it again (a rank shim, an in-program launch).
#include <string>

namespace nano {

/// The absolute path of this process's executable (/proc/self/exe); "" when it cannot be read.
std::string self_executable();

}  // namespace nano
