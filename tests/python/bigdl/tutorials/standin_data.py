"""What BigDL-Nano's training tutorials download, made here in the shape they read it, for a
test that runs them unchanged (bigdl_test.py, in a private mount namespace, so their fixed
/tmp/data is the test's own):

- make_oxford_pet(root): torchvision's OxfordIIITPet as it lies on disk after its download
  (ROOT/oxford-iiit-pet/images/*.jpg and annotations/{trainval,test}.txt, 37 breeds): two JPEG
  photos' worth of pixels per breed, of varied sizes, coloured by breed;
- make_resnet18_weights(torch_home): the file torchvision's resnet18(pretrained=True) loads from
  its cache (TORCH_HOME/hub/checkpoints/resnet18-f37072fd.pth), holding a seeded ResNet-18's
  weights instead of ImageNet's (the tutorials' accuracy is not what the test checks)."""
import os

import torch
import torchvision
from PIL import Image

BREEDS = 37


def make_oxford_pet(root, per_breed=2):
    base = os.path.join(root, "oxford-iiit-pet")
    images = os.path.join(base, "images")
    annotations = os.path.join(base, "annotations")
    os.makedirs(images)
    os.makedirs(annotations)
    g = torch.Generator().manual_seed(0)
    lines = []
    for breed in range(1, BREEDS + 1):
        for n in range(1, per_breed + 1):
            name = f"Breed{breed:02d}_{n}"
            height, width = (int(v) for v in torch.randint(120, 200, (2,), generator=g))
            colour = torch.tensor([(breed * 37) % 256, (breed * 91) % 256, (breed * 151) % 256], dtype=torch.int16)
            pixels = (colour + torch.randint(-50, 51, (height, width, 3), generator=g, dtype=torch.int16)).clamp(0, 255)
            Image.fromarray(pixels.to(torch.uint8).numpy(), mode="RGB").save(os.path.join(images, name + ".jpg"))
            lines.append(f"{name} {breed} {1 + breed % 2} {n}\n")
    for split in ("trainval", "test"):
        with open(os.path.join(annotations, f"{split}.txt"), "w") as f:
            f.writelines(lines)


def make_resnet18_weights(torch_home):
    folder = os.path.join(torch_home, "hub", "checkpoints")
    os.makedirs(folder)
    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18().state_dict(), os.path.join(folder, "resnet18-f37072fd.pth"))
