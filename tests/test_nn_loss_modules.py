"""Loss modules: torch.nn's constructors (positional order, deprecated size_average/reduce) and
values, against torch's modules on the same inputs."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import rng, tag


def _inputs(name):
    g = rng()
    x = g.standard_normal((6, 5)).astype(np.float32)
    labels = g.integers(0, 5, 6)
    probs = 1 / (1 + np.exp(-x))
    binary = (g.random((6, 5)) > 0.5).astype(np.float32)
    if name in ("CrossEntropyLoss", "NLLLoss"):
        return (x if name == "CrossEntropyLoss" else np.log(probs / probs.sum(1, keepdims=True))), labels
    if name == "BCELoss":
        return probs.astype(np.float32), binary
    if name == "BCEWithLogitsLoss":
        return x, binary
    if name == "KLDivLoss":
        return np.log(probs).astype(np.float32), (probs / probs.sum()).astype(np.float32)
    return x, g.standard_normal((6, 5)).astype(np.float32)


CASES = [("L1Loss", {}), ("MSELoss", {"reduction": "sum"}), ("SmoothL1Loss", {"beta": 0.5}),
         ("HuberLoss", {"delta": 0.7}), ("KLDivLoss", {"reduction": "batchmean"}), ("BCELoss", {}),
         ("BCEWithLogitsLoss", {"pos_weight": "tensor"}), ("NLLLoss", {"ignore_index": 2}),
         ("CrossEntropyLoss", {"label_smoothing": 0.1}), ("CrossEntropyLoss", {"weight": "tensor"}),
         ("CrossEntropyLoss", {"reduction": "none"}), ("MSELoss", {"size_average": False}),
         ("L1Loss", {"reduce": False})]


@pytest.mark.parametrize("name,options", CASES, ids=[f"{n}-{sorted(o)}" for n, o in CASES])
def test_loss_module_matches_torch(name, options, device):
    x, target = _inputs(name)
    weight = rng().random(5).astype(np.float32) + 0.5
    ours = {k: (wg.tensor(weight, device=device) if v == "tensor" else v) for k, v in options.items()}
    theirs = {k: (torch.tensor(weight) if v == "tensor" else v) for k, v in options.items()}
    module, reference = getattr(wg.nn, name)(**ours), getattr(torch.nn, name)(**theirs)
    assert repr(module) == repr(reference)
    xw = wg.tensor(x, device=device, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, expected = module(xw, wg.tensor(target, device=device)), reference(xt, torch.tensor(target))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5,
                               err_msg=tag(name))
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(xw.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=tag(f"{name} grad"))


def test_positional_order_is_torchs():
    weight = wg.tensor([1.0, 2.0, 3.0])
    loss = wg.nn.CrossEntropyLoss(weight, None, 1)   # weight, size_average, ignore_index
    assert loss.weight is weight and loss.ignore_index == 1 and loss.reduction == "mean"
    assert "weight" in dict(loss.named_buffers())
