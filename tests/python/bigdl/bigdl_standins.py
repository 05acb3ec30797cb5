"""What BigDL-Nano's tests import that this suite cannot download or does not have, in the shape
the tests use it; nothing of nano_torch is here.

- CIFAR10: a same-shaped stand-in for torchvision's CIFAR-10 (32x32 RGB PIL images, labels 0-9),
  made on the fly from each index, so nothing is downloaded or written (the tests pass
  root="/tmp/data", a folder every user shares: it is never touched). Each class has its own
  colour, so the images are learnable. It holds a tenth of CIFAR-10's images (5000 for training,
  1000 for test): the tests take every 50th (or 256th) of them, so each trains one or two batches
  of the same shape instead of four; what they check does not depend on how many (the suite's
  time does: about 10 times less).
- create_data_loader, create_test_data_loader, data_transform: as BigDL's test helpers
  (test/pytorch/utils/_train_torch_lightning.py) make them, over the stand-in.
- vision.resnet18: as BigDL's bigdl.nano.pytorch.vision.models.vision.resnet18 builds it over
  torchvision's ResNet-18 (include_top=False: the head replaced by an identity and the backbone's
  output size kept; freeze=True: every backbone parameter frozen).
- LightningModule, Trainer, accuracy: the names BigDL's channels-last tests import from
  Lightning, BigDL's Trainer and torchmetrics. Only their Trainer tests use them, and those stay
  out (conftest.py): LightningModule is a plain module, Trainer and accuracy refuse to run.
- Subnormal floats flushed to zero (torch.set_flush_denormal) in every process that imports this
  module: the callers and, as they import the tests' module, the ranks. Trained from random
  weights on these images, the ResNets' backward runs into float32 subnormals, which x86 CPUs
  compute 10 to 20 times slower (the one-process channels-last test took 65 s instead of 4 s on the
  2-core VM); what the tests check does not depend on them.
- TORCH_VERSION_LESS_1_12, TORCH_VERSION_LESS_2_0: BigDL's version flags. BigDL replaced its
  channels-last tests by a placeholder on torch 2 because its Lightning 1.x did not run there;
  nano_torch has no Lightning, so the port runs them on every torch: LESS_2_0 is True here by
  design, LESS_1_12 is the installed torch's answer.
"""
import types

import torch
import torchvision
import torchvision.transforms as transforms
from PIL import Image
from torch.utils.data import DataLoader, Subset
from torch.utils.data.sampler import SequentialSampler

_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
TORCH_VERSION_LESS_1_12 = _VERSION < (1, 12)
TORCH_VERSION_LESS_2_0 = True  # see the module's docstring: the port runs the channels-last tests on torch 2
torch.set_flush_denormal(True)


class CIFAR10(torchvision.datasets.VisionDataset):
    """torchvision.datasets.CIFAR10's interface and shapes, images made from their index."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        self._count = 5000 if train else 1000
        self._offset = 0 if train else 5000

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if not 0 <= index < self._count:
            raise IndexError(f"CIFAR10 stand-in: index {index} out of range {self._count}")
        target = index % 10
        g = torch.Generator().manual_seed(self._offset + index)
        colour = torch.tensor([(target * 25) % 256, (target * 71) % 256, (target * 113) % 256], dtype=torch.int16)
        pixels = (colour + torch.randint(-40, 41, (32, 32, 3), generator=g, dtype=torch.int16)).clamp(0, 255)
        img = Image.fromarray(pixels.to(torch.uint8).numpy(), mode="RGB")
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


data_transform = transforms.Compose([
    transforms.Resize(256),
    transforms.ColorJitter(),
    transforms.RandomCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.Resize(128),
    transforms.ToTensor()
])


def create_data_loader(dir, batch_size, num_workers, transform, subset=50, shuffle=True, sampler=False):
    train_set = CIFAR10(root=dir, train=True, download=True, transform=transform)
    # every subset-th image, as BigDL's helper takes them
    train_subset = Subset(train_set, list(range(0, len(train_set), subset)))
    if sampler:
        return DataLoader(train_subset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                          sampler=SequentialSampler(train_subset))
    return DataLoader(train_subset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)


def create_test_data_loader(dir, batch_size, num_workers, transform, subset=50):
    test_set = CIFAR10(root=dir, train=False, download=True, transform=transform)
    test_subset = Subset(test_set, list(range(0, len(test_set), subset)))
    return DataLoader(test_subset, batch_size=batch_size, shuffle=False, num_workers=num_workers)


class BackboneModule(torch.nn.Module):
    """A model without its head, which knows the size of what it outputs."""

    def __init__(self, model, output_size):
        super().__init__()
        self.model = model
        self.output_size = output_size

    def forward(self, x):
        return self.model(x)

    def get_output_size(self):
        return self.output_size


def _resnet18(pretrained=False, include_top=False, freeze=False):
    if pretrained:
        raise ValueError("bigdl_standins: pretrained weights cannot be downloaded here")
    model = torchvision.models.resnet18()
    if freeze:  # every parameter but the head's (none, once the head is replaced below)
        for name, parameter in model.named_parameters():
            if not name.startswith("fc."):
                parameter.requires_grad = False
    if include_top:
        return model
    output_size = model.fc.in_features
    model.fc = torch.nn.Identity()
    return BackboneModule(model, output_size)


vision = types.SimpleNamespace(resnet18=_resnet18)
LightningModule = torch.nn.Module


def Trainer(*args, **kwargs):
    raise RuntimeError("bigdl_standins: BigDL's Trainer (Lightning) is not part of nano_torch")


def accuracy(*args, **kwargs):
    raise RuntimeError("bigdl_standins: torchmetrics is not part of this suite")
