"""webgrad.optim against torch.optim on CPU: several steps on random parameters and gradients."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import optim
from conftest import randn

# `device` is conftest's fixture: every test runs on cpu and webgpu
SHAPES = [(7, 5), (5,), (3, 4, 2)]
CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.03, betas=(0.5, 0.9), weight_decay=0.3)),
]
STATE_KEYS = {"SGD": ["momentum_buffer"], "Adam": ["exp_avg", "exp_avg_sq"], "AdamW": ["exp_avg", "exp_avg_sq"]}


def _pair(device):
    values = [randn(*s) for s in SHAPES]
    return ([wg.tensor(v, device=device, requires_grad=True) for v in values],
            [torch.tensor(v, requires_grad=True) for v in values])


def _set_grads(ours, theirs, device):
    for p, t in zip(ours, theirs):
        g = randn(*p.shape)
        p.grad, t.grad = wg.tensor(g, device=device), torch.tensor(g)


def _assert_close(ours, theirs):
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[f"{n}-{'-'.join(k)}" for n, k in CONFIGS])
def test_steps_match_torch(device, name, kwargs):
    ours, theirs = _pair(device)
    opt, topt = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    for _ in range(6):
        _set_grads(ours, theirs, device)
        opt.step()
        topt.step()
        _assert_close(ours, theirs)
    keys = STATE_KEYS[name] if name != "SGD" or kwargs.get("momentum") else []
    for p, t in zip(ours, theirs):
        for key in keys:
            np.testing.assert_allclose(opt.state[p][key].numpy(), topt.state[t][key].numpy(), rtol=1e-5, atol=1e-6)
        if name != "SGD":
            assert opt.state[p]["step"] == int(topt.state[t]["step"]) == 6


def test_param_groups_closure_and_strided_grads(device):
    ours, theirs = _pair(device)
    groups = lambda ps: [{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5, "momentum": 0.5}]  # noqa: E731
    opt, topt = optim.SGD(groups(ours), lr=0.1, momentum=0.9), torch.optim.SGD(groups(theirs), lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in topt.param_groups] == [0.1, 0.5]
    for step in range(3):
        _set_grads(ours, theirs, device)
        ours[0].grad = ours[0].grad.T.contiguous().T          # a transposed (non-contiguous) gradient
        assert not ours[0].grad.is_contiguous()
        opt.param_groups[1]["lr"] = topt.param_groups[1]["lr"] = 0.5 / (step + 1)   # schedulers edit groups
        assert opt.step(lambda: "loss") == "loss"
        topt.step()
        _assert_close(ours, theirs)


def test_step_is_one_fused_call_per_parameter(device, monkeypatch):
    params = [wg.randn(4, 3, device=device, requires_grad=True) for _ in range(3)]
    params[0].grad, params[1].grad = wg.ones(4, 3, device=device), wg.ones(4, 3, device=device)  # the third has none
    backend, calls = params[0].backend, []
    real = backend.optimizer_step
    monkeypatch.setattr(backend, "optimizer_step", lambda kind, *args: (calls.append(kind), real(kind, *args)))
    before = params[2].tolist()
    optim.Adam(params).step()
    assert calls == ["adam", "adam"] and params[2].tolist() == before


def test_zero_grad(device):
    p = wg.randn(3, device=device, requires_grad=True)
    opt = optim.AdamW([p])
    assert opt.defaults["weight_decay"] == torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).defaults[
        "weight_decay"]
    p.grad = wg.ones(3, device=device)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


BAD = [
    ("SGD", dict(lr=-0.1), "Invalid learning rate"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value"),
    ("SGD", dict(lr=0.1, weight_decay=-1), "Invalid weight_decay value"),
    ("SGD", dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
    ("Adam", dict(lr=-1), "Invalid learning rate"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon value"),
    ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    ("AdamW", dict(weight_decay=-0.01), "Invalid weight_decay value"),
]


@pytest.mark.parametrize("name,kwargs,message", BAD, ids=[m for _, _, m in BAD])
def test_bad_hyperparameters_raise_like_torch(device, name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        getattr(optim, name)([wg.zeros(2, device=device, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=message):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kwargs)


def test_bad_parameters(device):
    p = wg.zeros(2, device=device, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.Adam([p, 1.0])
