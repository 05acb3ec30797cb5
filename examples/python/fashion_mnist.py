"""Fashion-MNIST from Debian's dataset-fashion-mnist, for the Python examples: the seed programs'
own data (downloads) replaced by files already on the machine."""
import gzip
import os
import struct

import torch
from torch.utils.data import Dataset

FOLDER = "/usr/share/datasets/fashion-mnist"


def _idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


class FashionMNIST(Dataset):
    """Images as float tensors (channels x 28 x 28, normalised), labels as int64. `channels` = 3
    repeats the grey channel for models made for colour (torchvision's ResNet-18). `limit` keeps
    the first samples only (the environment's NANO_EXAMPLE_SAMPLES when not given)."""

    def __init__(self, train=True, channels=1, limit=None):
        split = "train" if train else "t10k"
        limit = limit or int(os.environ.get("NANO_EXAMPLE_SAMPLES", "0")) or None
        images = _idx(os.path.join(FOLDER, f"{split}-images-idx3-ubyte.gz"))[:limit]
        self.images = ((images.float() / 255 - 0.2860) / 0.3530).unsqueeze(1)
        self.labels = _idx(os.path.join(FOLDER, f"{split}-labels-idx1-ubyte.gz"))[:limit].long()
        self.channels = channels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i].expand(self.channels, 28, 28), self.labels[i]
