"""Training end to end: the Playground sets reach their accuracy on both devices, the devices
agree step by step, and a model trains exactly as the same model does in PyTorch."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import cli, data, nn, optim
from conftest import assert_close, seed

# `device` is conftest's fixture: every test runs on cpu and webgpu


# The CLI's defaults (8,8 tanh, Adam 0.03, 500 steps of 32) reach 1.0 on XOR for most seeds; on
# about a quarter, 1 to 3 of the 250 test points lying just off an axis, where no training point
# pins the boundary, fall on the wrong side (>= 0.988 on 40 of 40 seeds).
def test_xor_reaches_full_test_accuracy(device):
    assert cli.train("xor", device, seed=0) == 1.0


def test_xor_on_a_fresh_seed(device):
    # The misses are test points next to an axis, where the classes meet: 60 fresh seeds gave 0.98 at
    # worst, but about 1 seed in 100 gives 0.976 (6 of 250), which a 0.98 bar failed by chance.
    assert cli.train("xor", device, seed=seed()) >= 0.96


def test_spirals_reach_95_percent(device):
    # A fixed seed: this recipe gets 0.98 here but under 0.95 on 2 of 40 seeds; one that holds on
    # every seed (32,32,32) costs twice the time on a software GPU, where matmul dominates a step.
    acc = cli.train("spirals", device, hidden=(16, 16, 16), steps=400, batch_size=250, seed=0)
    assert acc >= 0.95


def _first_steps(device, s, optimizer, epochs=2):
    """Losses and final parameters of the first minibatch steps on spirals, from seed s."""
    wg.manual_seed(s)
    split = data.spirals(n=120, noise=0.1, seed=s, device=device)
    model = nn.mlp([2, 8, 8, 2], "tanh", device=device)
    opt = cli.OPTIMIZERS[optimizer](model.parameters(), lr=0.03)
    loader = data.DataLoader(data.TensorDataset(split.x_train, split.y_train), 10, shuffle=True, seed=s)
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().numpy() for p in model.parameters()]


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_cpu_and_webgpu_take_the_same_first_steps(optimizer):
    s = seed()
    (cpu_losses, cpu_params), (gpu_losses, gpu_params) = (_first_steps(d, s, optimizer) for d in ("cpu", "webgpu"))
    assert len(cpu_losses) == 12
    assert_close(np.array(gpu_losses), np.array(cpu_losses), atol=1e-4, rtol=1e-4, what="losses, webgpu vs cpu")
    for g, c in zip(gpu_params, cpu_params):
        assert_close(g, c, atol=1e-4, rtol=1e-4, what="parameters after 12 steps, webgpu vs cpu")


def test_training_matches_torch(device):
    s = seed()
    wg.manual_seed(s)
    split = data.circles(n=100, noise=0.1, seed=s, device=device)
    model = nn.mlp([2, 8, 8, 2], "tanh", device=device)
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                                 torch.nn.Linear(8, 2))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    opt, topt = optim.Adam(model.parameters(), lr=0.01), torch.optim.Adam(theirs.parameters(), lr=0.01)
    x, y = split.x_train, split.y_train
    tx, ty = torch.tensor(x.numpy()), torch.tensor(y.numpy()).long()
    losses, tlosses = [], []
    for _ in range(20):
        for o, m, inputs, labels, record, F in ((opt, model, x, y, losses, nn.functional),
                                                (topt, theirs, tx, ty, tlosses, torch.nn.functional)):
            loss = F.cross_entropy(m(inputs), labels)
            o.zero_grad()
            loss.backward()
            o.step()
            record.append(loss.item())
    assert_close(np.array(losses), np.array(tlosses), atol=1e-5, rtol=1e-4, what="losses vs torch")
    # Adam's step lr * m / sqrt(v) is ill-conditioned where a gradient is near zero: a weight whose
    # gradient was 2.9e-6 (seed 2103735075), where the devices' sums differ by 4e-8, moved ~1% of lr
    # differently (1.0e-4 after 20 steps; 60 other seeds stayed under 8e-6). So a fiftieth of lr.
    for p, t in zip(model.parameters(), theirs.parameters()):
        assert_close(p, t, atol=0.01 / 50, rtol=1e-4, what="parameters after 20 Adam steps vs torch")
