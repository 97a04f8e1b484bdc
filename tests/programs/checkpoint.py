"""Save a training checkpoint (model, optimizer, epoch, a config dict) mid-run, load it into a fresh
model and optimizer, and resume: the resumed run must end where an uninterrupted one does."""
import copy
import io

import torch
import torch.nn as nn


def make_data(rng):
    return {"x": rng.standard_normal((40, 6)).astype("float32"), "y": rng.standard_normal((40, 2)).astype("float32")}


def build():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))


def steps(model, optimizer, x, y, count):
    for _ in range(count):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def run(model, data):
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"])
    twin = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    steps(model, optimizer, x, y, 3)
    buffer = io.BytesIO()
    torch.save({"epoch": 3, "model_state_dict": model.state_dict(), "optimizer_state_dict": optimizer.state_dict(),
                "config": {"lr": 1e-2, "layers": [6, 16, 2], "name": "mlp"}}, buffer)
    straight = steps(model, optimizer, x, y, 4)

    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    resumed_model = twin
    resumed_model.load_state_dict(checkpoint["model_state_dict"])
    resumed_optimizer = torch.optim.Adam(resumed_model.parameters(), lr=checkpoint["config"]["lr"], weight_decay=1e-4)
    resumed_optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
    resumed = steps(resumed_model, resumed_optimizer, x, y, 4)
    gap = max((a - b).abs().max().item() for a, b in zip(model.parameters(), resumed_model.parameters()))
    return {"straight": straight, "resumed": resumed, "resumed_equals_straight": gap < 1e-6,
            "epoch": checkpoint["epoch"], "config": checkpoint["config"],
            "state_keys": sorted(checkpoint["optimizer_state_dict"]["state"][0].keys())}
