"""BigDL-Nano's "@nano decorator" program on nano: an unchanged training loop with a tqdm bar,
run in 2 ranks; the caller's model is trained afterwards. Against BigDL-Nano's, two things
changed: the import line, and the data (Fashion-MNIST from Debian's dataset-fashion-mnist, no
pretrained weights).

    /usr/bin/python3 examples/python/nano_decorator.py   # NANO_EXAMPLE_SAMPLES=2048 for a short run
"""
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision.models import resnet18
from tqdm import tqdm

from nano_torch import nano  # was: from bigdl.nano.pytorch import nano
from fashion_mnist import FashionMNIST


class MyPytorchModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = resnet18(num_classes=10)

    def forward(self, x):
        return self.model(x)


@nano(num_processes=2)
def training_loop(model, optimizer, train_loader, num_epochs, loss_func):
    for epoch in range(num_epochs):
        model.train()
        train_loss, num = 0, 0
        with tqdm(train_loader, unit="batch") as tepoch:
            for data, target in tepoch:
                tepoch.set_description(f"Epoch {epoch}")
                optimizer.zero_grad()
                output = model(data)
                loss = loss_func(output, target)
                loss.backward()
                optimizer.step()
                loss_value = loss.sum()
                train_loss += loss_value
                num += 1
                tepoch.set_postfix(loss=loss_value.item())
            print(f"Train Epoch: {epoch}, avg_loss: {train_loss / num}")


def test_accuracy(model):
    loader = DataLoader(FashionMNIST(train=False, channels=3, limit=1000), batch_size=256)
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return correct / len(loader.dataset)


if __name__ == "__main__":
    model = MyPytorchModule()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    loss_func = nn.CrossEntropyLoss()
    train_loader = DataLoader(FashionMNIST(train=True, channels=3), batch_size=32, shuffle=True)
    training_loop(model, optimizer, train_loader, num_epochs=1, loss_func=loss_func)
    # The caller's model holds rank 0's trained weights.
    print(f"test accuracy of the caller's model: {test_accuracy(model):.4f}")
