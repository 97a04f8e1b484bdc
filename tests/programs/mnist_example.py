"""The classic MNIST example's network and loop (two convolutions, dropout, max pooling,
log_softmax + nll_loss, Adadelta with StepLR), on small synthetic digits so it runs offline."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 6 * 6, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def make_data(rng):
    return {"images": rng.random((64, 1, 16, 16), dtype=np.float32), "labels": rng.integers(0, 10, 64)}


def build():
    return Net()


def train(model, loader, optimizer, log):
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        log.append(loss.item())


def test(model, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(loader.dataset), correct


def run(model, data):
    images = torch.from_numpy(data["images"])
    images = (images - 0.1307) / 0.3081
    dataset = torch.utils.data.TensorDataset(images, torch.from_numpy(data["labels"]).long())
    loader = torch.utils.data.DataLoader(dataset, batch_size=16)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    log, lrs = [], []
    model.eval()   # dropout off during the compared training (its random masks differ between libraries)
    for _epoch in range(1, 3):
        model.dropout1.p = model.dropout2.p = 0.0
        train(model, loader, optimizer, log)
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
    test_loss, correct = test(model, loader)
    return {"losses": log, "lrs": lrs, "test_loss": test_loss, "correct_in_range": 0 <= correct <= 64,
            "fc2_weight": model.fc2.weight[:2, :5].tolist()}
