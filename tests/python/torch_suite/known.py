"""The failures of PyTorch's distributed suite on `nano` that are explained, and why; every
other failure fails suite_test.py. Each one fails on Gloo as well, in the same environment
(scripts/torch-suite.sh shows both): none is a gap of nano's.
"""

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


def failures(torch_version, world_size):
    """{test name: why it fails, on Gloo too} for this torch and world size."""
    explained = {}
    if torch_version.startswith("1.13"):
        why, names = _TORCH_1_13_REPLICATED_DDP
        explained.update({name: why for name in names})
    return explained
