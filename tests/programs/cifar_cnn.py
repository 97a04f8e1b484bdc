"""A CIFAR-style CNN as a tutorial writes one: conv blocks in nn.Sequential with BatchNorm2d and
in-place ReLU, max pooling, Dropout, AdaptiveAvgPool2d and a classifier head; per-channel
normalisation and flips as augmentation, SGD with Nesterov momentum and weight decay under a
OneCycleLR, label smoothing, gradient clipping; then evaluation with the running statistics."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(conv_block(3, 8), conv_block(8, 16), nn.MaxPool2d(2), nn.Dropout(0.1),
                                      conv_block(16, 16), nn.AdaptiveAvgPool2d((1, 1)))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.5),
                                        nn.Linear(32, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def make_data(rng):
    return {"images": rng.random((32, 3, 10, 10), dtype=np.float32), "labels": rng.integers(0, 10, 32),
            "flips": rng.random(32) < 0.5}


def build():
    return Net()


def run(model, data):
    images = torch.from_numpy(data["images"])
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    images = (images - mean) / std
    flips = torch.from_numpy(data["flips"])
    images = torch.where(flips[:, None, None, None], torch.flip(images, dims=[3]), images)
    labels = torch.from_numpy(data["labels"]).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=16)
    for m in model.modules():   # dropout off: its random masks differ between libraries
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    epochs = 2
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, epochs=epochs,
                                                    steps_per_epoch=len(loader))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    losses, lrs, norms = [], [], []
    for _epoch in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(x), y)
            loss.backward()
            norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)))
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            lrs.append(scheduler.get_last_lr()[0])
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            _, predicted = torch.max(logits, 1)
            total += y.size(0)
            correct += (predicted == y).sum().item()
        probs = F.softmax(model(images[:4]), dim=1)
    bn = model.features[0][1]
    return {"losses": losses, "lrs": lrs, "grad_norms": norms, "accuracy": 100.0 * correct / total,
            "probs": probs.tolist(), "running_mean": bn.running_mean.tolist(), "running_var": bn.running_var.tolist(),
            "batches_tracked": int(bn.num_batches_tracked)}
