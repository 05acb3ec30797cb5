"""Bytes between the ranks of a process group as tensors of bytes, never through pickle: torch's
*_object collectives unpickle what arrives, and what arrives from another host may be a
stranger's (the links between hosts carry no authentication). The bytes themselves are checked
(sealed, hashed) by whoever uses them."""
import torch
import torch.distributed as dist


def broadcast_bytes(data, src):
    """`data` (bytes, given on rank `src`, None elsewhere) on every rank."""
    size = torch.tensor([len(data) if data is not None else 0], dtype=torch.int64)
    dist.broadcast(size, src)
    if data is not None:
        buffer = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    else:
        buffer = torch.empty(int(size.item()), dtype=torch.uint8)
    if buffer.numel():
        dist.broadcast(buffer, src)
    return buffer.numpy().tobytes()


def all_gather_fixed(data, world_size):
    """Every rank's `data` (bytes of the same length on every rank), in rank order."""
    mine = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    out = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(out, mine)
    return [t.numpy().tobytes() for t in out]


def all_gather_bytes(data, world_size):
    """Every rank's `data` (bytes of any length), in rank order."""
    sizes = all_gather_fixed(len(data).to_bytes(8, "little"), world_size)
    sizes = [int.from_bytes(s, "little") for s in sizes]
    longest = max(sizes)
    padded = all_gather_fixed(data + bytes(longest - len(data)), world_size) if longest else [b""] * world_size
    return [item[:size] for item, size in zip(padded, sizes)]
