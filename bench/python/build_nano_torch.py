#!/usr/bin/env python3
"""Builds the `nano` torch.distributed backend (nano_torch) for the Python that runs this, with
nothing but that Python's torch and a C++ compiler: no CMake, no Debian packages, no other part
of nano. For a machine with a pip-installed torch (a wheel carries torch's and pybind11's headers,
not Gloo's, which the backend does without), where the CMake build (python/CMakeLists.txt) cannot run for want of nano's
other dependencies. torch's own extension builder compiles the backend and the collectives'
sources it uses (in parallel with ninja, MAX_JOBS at a time) with the flags that torch itself
was built with, so torch's types cross into the module.

Usage: python3 bench/python/build_nano_torch.py OUT_DIR
Leaves OUT_DIR/nano_torch/{*.py,_C*.so}: put OUT_DIR on PYTHONPATH and `import nano_torch`.
This build has the backend but not the launcher (it needs hwloc): TorchNano and @nano run there
under nano-run, torchrun or mpirun, or at num_processes=1.
"""
import glob
import os
import shutil
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The extension and what it uses of nano: the libraries of runtime/timeline/, runtime/rendezvous/ and
# runtime/collectives/ but the Gloo communicator's device (gloo_device.cc, which needs Gloo's
# headers), and its helpers.
SOURCES = ["python/module.cc", "python/torch_backend.cc", "python/torch_backend_now.cc", "python/torch_backend_ops.cc",
           "python/backend_executors.cc", "python/backend_rendezvous.cc", "python/nano_work.cc",
           "runtime/timeline/recorder.cc", "runtime/timeline/step_report.cc",
           "runtime/rendezvous/job_store.cc", "runtime/rendezvous/job_store_server.cc",
           "runtime/rendezvous/net_address.cc", "runtime/rendezvous/rendezvous.cc", "runtime/rendezvous/store_wire.cc",
           "runtime/collectives/collective_signature.cc", "runtime/collectives/gloo_binding.cc",
           "runtime/collectives/host_layout.cc", "runtime/collectives/serial_executor.cc",
           "runtime/collectives/shm_collectives.cc", "runtime/collectives/shm_rendezvous.cc",
           "runtime/collectives/wire_ring.cc", "runtime/folder_claim/folder_claim.cc", "runtime/checkpoint_files/checkpoint_format.cc",
           "runtime/checkpoint_files/checkpoint_reader.cc", "runtime/checkpoint_files/checkpoint_folder.cc",
           "runtime/checkpoint_files/checkpoint_writer.cc",
           "runtime/checkpoint_files/checkpoint_stop.cc", "core/cpulist.cc",
           "core/job_secret.cc", "core/mac.cc", "core/parse.cc"]


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    out = os.path.abspath(sys.argv[1])
    import torch
    from torch.utils import cpp_extension
    os.environ.setdefault("MAX_JOBS", str(len(os.sched_getaffinity(0))))
    package = os.path.join(out, "nano_torch")
    os.makedirs(package, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nano-torch-build-") as work:
        # torch names the module after `name` (TORCH_EXTENSION_NAME); module.cc defines _C.
        cpp_extension.load(name="_C", sources=[os.path.join(ROOT, s) for s in SOURCES],
                           extra_include_paths=[ROOT, os.path.join(ROOT, "include")],
                           extra_cflags=["-O3", "-std=c++17", "-DNANO_TORCH_WITHOUT_LAUNCH"],
                           extra_ldflags=["-lcrypto"], build_directory=work, is_python_module=False, verbose=False)
        built = glob.glob(os.path.join(work, "_C*.so"))
        if len(built) != 1:
            sys.exit(f"build_nano_torch.py: expected one _C*.so in {work}, found {built}")
        # The name Python looks for (e.g. _C.cpython-312-x86_64-linux-gnu.so) or plain _C.so.
        shutil.copy(built[0], os.path.join(package, "_C.so"))
    for py in glob.glob(os.path.join(ROOT, "python/nano_torch/*.py")):
        shutil.copy(py, package)
    print(f"build_nano_torch.py: nano_torch for torch {torch.__version__} in {package}")


if __name__ == "__main__":
    main()
