"""BigDL-Nano's "Accelerate PyTorch Training using Multiple Instances" program on nano: a
TorchNano subclass that trains torchvision's ResNet-18 in 2 ranks. Against BigDL-Nano's, two
things changed: the import line, and the data (Fashion-MNIST from Debian's dataset-fashion-mnist,
no pretrained weights: nothing is downloaded).

    /usr/bin/python3 examples/python/torch_nano.py     # NANO_EXAMPLE_SAMPLES=2048 for a short run
"""
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision.models import resnet18

from nano_torch import TorchNano  # was: from bigdl.nano.pytorch import TorchNano
from fashion_mnist import FashionMNIST


class MyPytorchModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = resnet18(num_classes=10)

    def forward(self, x):
        return self.model(x)


def create_dataloaders():
    train_loader = DataLoader(FashionMNIST(train=True, channels=3), batch_size=32, shuffle=True)
    test_loader = DataLoader(FashionMNIST(train=False, channels=3, limit=1000), batch_size=256)
    return train_loader, test_loader


class MyNano(TorchNano):
    def train(self):
        model = MyPytorchModule()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
        loss_fuc = torch.nn.CrossEntropyLoss()
        train_loader, test_loader = create_dataloaders()

        model, optimizer, (train_loader, test_loader) = self.setup(model, optimizer, train_loader, test_loader)

        num_epochs = 1
        for epoch in range(num_epochs):
            model.train()
            train_loss, num = 0, 0
            for data, target in train_loader:
                optimizer.zero_grad()
                output = model(data)
                loss = loss_fuc(output, target)
                self.backward(loss)
                optimizer.step()
                train_loss += loss.item()
                num += 1
            self.print(f"Train Epoch: {epoch}, avg_loss: {train_loss / num}")

        model.eval()
        correct, seen = 0, 0
        with torch.no_grad():
            for data, target in test_loader:
                correct += (model(data).argmax(1) == target).sum().item()
                seen += len(target)
        return correct / seen


if __name__ == "__main__":
    accuracy = MyNano(num_processes=2).train()
    print(f"rank 0's test accuracy: {accuracy:.4f}")
