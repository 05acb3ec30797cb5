#pragma once
// The executors of every live `nano` torch backend in this process: each backend runs its
// operations, and the futures' callbacks, on one SerialExecutor of its own, and the
// interpreter's exit must wait for what they were given (drain_torch_backends).
#include <chrono>

namespace nano {

class SerialExecutor;

/// Counts `executor` (a backend's, when the backend is made) among the live ones.
void register_backend_executor(SerialExecutor& executor);

/// Takes `executor` (a backend's, when the backend is destroyed) out of the live ones. A backend
/// destroyed by one of its own tasks (a program's last reference to its process group dropped in
/// a future's callback) leaves its thread inside that task: drain_torch_backends waits for it.
void unregister_backend_executor(SerialExecutor& executor);

/// Waits, at most `limit` in all, until every live backend of this process has run what was
/// issued to it and the futures' callbacks that ran on its thread, and released what they
/// held. nano_torch calls it at the interpreter's exit (atexit), with the interpreter lock
/// released: afterwards no backend thread touches Python objects again, so none is caught by
/// the interpreter's finalization while it runs a callback or drops a Python-owned tensor
/// (torch ends such a thread inside a C++ frame: "terminate called without an active
/// exception"). False when a backend did not get there within `limit`.
bool drain_torch_backends(std::chrono::milliseconds limit);

}  // namespace nano
