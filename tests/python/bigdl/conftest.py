"""The BigDL-Nano tests that stay out of the port, each with why. Every other test of the three
ported files runs as BigDL wrote it (only the imports changed). bigdl_test.py checks that the
tests skipped are exactly these, for exactly these reasons."""
import os

import pytest

TRAINER = "BigDL's Trainer (Lightning's Trainer) is not part of nano_torch"
CCL = "needs oneCCL (oneccl_bindings_for_pytorch), which Debian does not package"
CUDA_PATCH = "BigDL's patch_torch(cuda_to_cpu=True) is not part of nano_torch"

STAY_OUT = {
    "test_torch_nano.py::TestLite::test_torch_nano_spawn_with_ccl": CCL,
    "test_torch_nano.py::TestLite::test_torch_nano_subprocess_with_ccl": CCL,
    "test_torch_nano.py::TestLite::test_torch_nano_cuda_patch_spawn": CUDA_PATCH,
    "test_torch_nano.py::TestLite::test_torch_nano_cuda_patch_subprocess": CUDA_PATCH,
}
for _case in ("test_trainer_lightning_channels_last", "test_trainer_channels_last_correctness",
              "test_trainer_lightning_channels_last_subprocess", "test_trainer_channels_last_correctness_subprocess"):
    STAY_OUT[f"test_channels_last.py::TestChannelsLast::{_case}"] = TRAINER
for _case in ("test_lightning_channels_last_spawn", "test_trainer_channels_last_correctness_spawn"):
    STAY_OUT[f"test_channels_last.py::TestChannelsLastSpawn::{_case}"] = TRAINER

# Applies on a CPU, but asks for more CPUs than a small machine has: run where there are enough.
NEEDS_CPUS = {"test_torch_nano.py::TestLite::test_torch_nano_specify_cpu_cores": 4}  # cpu_for_each_process=[[0,1],[2,3]]


def pytest_collection_modifyitems(config, items):
    usable = len(os.sched_getaffinity(0))
    for item in items:
        name = item.nodeid.rsplit("/", 1)[-1]
        if name in STAY_OUT:
            item.add_marker(pytest.mark.skip(reason=STAY_OUT[name]))
        elif name in NEEDS_CPUS and usable < NEEDS_CPUS[name]:
            item.add_marker(pytest.mark.skip(reason=f"needs {NEEDS_CPUS[name]} CPUs, this machine has {usable}"))
