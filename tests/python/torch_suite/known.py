"""The failures of PyTorch's distributed suite on `nano` that are explained, and why; every
other failure fails suite_test.py. Each entry is either a failure Gloo has too in the same
environment (scripts/torch-suite.sh shows both), or torch's own handling of a backend that is
not built into torch: none is a gap in nano's collectives.
"""
import sys

# torch 1.13 (Debian 12) on Python 3.11: the suite's ranks switch DDP to its replicated-tensor
# mode (_set_ddp_with_replicated_tensor), which imports torch.distributed._shard, whose dataclass
# with a mutable default Python 3.11 refuses ("mutable default ... TensorProperties"). Every
# test that builds such a DDP model fails before its first collective, on every backend.
_TORCH_1_13_REPLICATED_DDP = (
    "torch 1.13's replicated-tensor DDP cannot import on Python 3.11 (fails on gloo too)",
    [
        "test_DistributedDataParallelCPU",
        "test_DistributedDataParallelCPU_grad_is_view",
        "test_accumulate_gradients_no_sync",
        "test_accumulate_gradients_no_sync_allreduce_hook",
        "test_accumulate_gradients_no_sync_allreduce_with_then_hook",
        "test_accumulate_gradients_no_sync_grad_is_view",
        "test_ddp_create_graph",
        "test_ddp_logging_data_cpu",
        "test_static_graph_api_cpu",
    ],
)

# torch 2: DDP's logging data takes the backend's name from the process group, which knows a
# backend registered from outside torch only as BackendType.CUSTOM and so says "custom"; the
# test expects the registered name ("nano"). No backend outside torch can change it.
_TORCH_2_CUSTOM_NAME = (
    "torch 2's DDP logging names every backend registered from outside torch \"custom\"",
    ["test_ddp_logging_data_cpu"],
)

# Python 3.13 (Debian 13) words pickle's refusal of a local class "Can't get local object";
# the suite expects 3.12's "Can't pickle local object". The gather does refuse, on every backend.
_PYTHON_3_13_PICKLE_WORDS = (
    "Python 3.13 words pickle's refusal differently from what the suite expects (fails on gloo too)",
    ["test_gather_object", "test_gather_object_subgroup"],
)


def failures(torch_version, world_size, python=sys.version_info):
    """{test name: why it fails} for this torch, world size and Python."""
    explained = {}
    if torch_version.startswith("1.13"):
        groups = [_TORCH_1_13_REPLICATED_DDP]
    else:
        groups = [_TORCH_2_CUSTOM_NAME]
    if python >= (3, 13):
        groups.append(_PYTHON_3_13_PICKLE_WORDS)
    for why, names in groups:
        explained.update({name: why for name in names})
    return explained


def least_passed(torch_version, world_size):
    """How many tests nano passes at least with this torch and world size: what scripts/torch-suite.sh
    measured on Debian 12 (torch 1.13) and 13 (2.6), Gloo's count less the explained failures. An
    environment with more (torchvision, say) only adds."""
    if torch_version.startswith("1.13"):
        return 84 if world_size == 2 else 105
    return 90
