#pragma once
// nano_torch._C.launch and _C.check_launch: how the Python API (nano_torch.TorchNano, @nano)
// starts its ranks. Its options are TorchNanoOptions' launch fields under the same names,
// converted by the same launch_options_of() as nano::TorchNano's, and the ranks are planned,
// pinned, supervised and restarted by nano's launcher library, as nano-run's are: Python adds
// a front end, not a second launcher.
#include <pybind11/pybind11.h>

namespace nano::python {

/// Adds launch() and check_launch() to the extension module `m`.
void bind_launch(pybind11::module_& m);

}  // namespace nano::python
