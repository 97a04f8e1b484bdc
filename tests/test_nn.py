"""webgrad.nn against NumPy maths and PyTorch (names, shapes, reprs, values), on both devices."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn, optim
from webgrad.nn import init
from conftest import randn, rng

# `device` is conftest's fixture: every test runs on cpu and webgpu


def _np(t):
    return t.detach().numpy()


@pytest.mark.parametrize("lead", [(6,), (2, 3)], ids=["2d", "batched"])
def test_linear_forward_backward_matches_numpy(device, lead):
    layer = nn.Linear(5, 3, device=device)
    w, b = _np(layer.weight), _np(layer.bias)
    x_np, g_np = randn(*lead, 5), randn(*lead, 3)
    x = wg.tensor(x_np, device=device, requires_grad=True)
    y = layer(x)
    np.testing.assert_allclose(_np(y), x_np @ w.T + b, rtol=1e-5, atol=1e-5)
    (y * wg.tensor(g_np, device=device)).sum().backward()
    flat_x, flat_g = x_np.reshape(-1, 5), g_np.reshape(-1, 3)
    np.testing.assert_allclose(_np(x.grad), g_np @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(layer.weight.grad), flat_g.T @ flat_x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(layer.bias.grad), flat_g.sum(0), rtol=1e-4, atol=1e-5)


def test_linear_default_init_and_no_bias(device):
    layer = nn.Linear(400, 300, device=device)
    bound = 1 / math.sqrt(400)  # PyTorch: kaiming_uniform_(a=sqrt(5)) and the bias share this bound
    for p in (layer.weight, layer.bias):
        v = _np(p)
        assert p.is_leaf and p.requires_grad and p.device == device
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
    assert _np(layer.weight).std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    plain = nn.Linear(3, 2, bias=False, device=device)
    assert plain.bias is None and [n for n, _ in plain.named_parameters()] == ["weight"]
    x = wg.randn(4, 3, device=device)
    np.testing.assert_allclose(_np(plain(x)), _np(x) @ _np(plain.weight).T, rtol=1e-5, atol=1e-6)


def _torch_mlp():
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _mlp(device):
    return nn.Sequential(nn.Linear(3, 8, device=device), nn.ReLU(), nn.Linear(8, 2, device=device))


def test_state_dict_matches_torch_and_loads_torch_values(device):
    theirs, ours = _torch_mlp(), _mlp(device)
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert list(sd) == list(tsd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [tuple(v.shape) for v in sd.values()] == [tuple(v.shape) for v in tsd.values()]
    assert not any(v.requires_grad for v in sd.values())

    params = list(ours.parameters())
    opt, topt = optim.SGD(params, lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    ours.load_state_dict({k: v.numpy() for k, v in tsd.items()})
    assert all(a is b for a, b in zip(params, ours.parameters()))   # copied in place

    x = randn(5, 3)
    out, tout = ours(wg.tensor(x, device=device)), theirs(torch.tensor(x))
    np.testing.assert_allclose(_np(out), tout.detach().numpy(), rtol=1e-5, atol=1e-5)
    # the optimizer still holds the live parameters: one step moves both models alike
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    opt.step()
    topt.step()
    np.testing.assert_allclose(_np(ours(wg.tensor(x, device=device))), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)

    # round trip through our own state_dict, onto the other device
    other = _mlp("webgpu" if device == "cpu" else "cpu")
    other.load_state_dict(ours.state_dict())
    np.testing.assert_allclose(_np(other(wg.tensor(x, device=other[0].weight.device))),
                               _np(ours(wg.tensor(x, device=device))), rtol=1e-5, atol=1e-6)


def test_load_state_dict_errors_leave_the_model_untouched(device):
    model = nn.Sequential(nn.Linear(2, 3, device=device))
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    before = _np(model[0].weight).copy()
    bad = [({"0.weight": wg.zeros(3, 2, device=device)}, r'Missing key\(s\) in state_dict: "0.bias"'),
           ({**sd, "0.weight": wg.zeros(3, 2), "extra": wg.zeros(1)}, r'Unexpected key\(s\) in state_dict: "extra"'),
           ({**sd, "0.weight": wg.zeros(3, 3)}, r"size mismatch for 0.weight: copying a param with shape \(3, 3\)")]
    for state, message in bad:
        with pytest.raises(RuntimeError, match=message):
            model.load_state_dict(state)
        np.testing.assert_array_equal(_np(model[0].weight), before)
    result = model.load_state_dict({"0.weight": wg.ones(3, 2), "extra": wg.zeros(1)}, strict=False)
    assert result.missing_keys == ["0.bias"] and result.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(_np(model[0].weight), np.ones((3, 2), np.float32))


class _Net(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 4, device=device), nn.Tanh())
        self.scale = nn.Parameter(wg.ones(1, device=device))
        self.head = nn.Linear(4, 1, device=device)
        self.tag = "not a parameter"

    def forward(self, x):
        return self.head(self.body(x)) * self.scale


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh())
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.head = torch.nn.Linear(4, 1)


def test_registration_names_and_traversal_match_torch(device):
    ours, theirs = _Net(device), _TorchNet()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert len(list(ours.modules())) == len(list(theirs.modules()))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.tag == "not a parameter" and ours.scale is ours._parameters["scale"]
    shared = nn.Sequential(ours.head, ours.head)          # a module used twice counts once
    assert len(list(shared.parameters())) == 2 and list(shared.state_dict()) == ["0.weight", "0.bias",
                                                                                 "1.weight", "1.bias"]
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        ours.missing  # noqa: B018


def test_repr_matches_torch(device):
    ours = nn.Sequential(nn.Linear(2, 8, bias=False, device=device), nn.Tanh(), nn.Sigmoid(), nn.ReLU(), nn.GELU(),
                         nn.LeakyReLU(0.2), nn.Flatten(), nn.Identity(), nn.Sequential(nn.Linear(8, 1, device=device)),
                         nn.CrossEntropyLoss(), nn.MSELoss())
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 8, bias=False), torch.nn.Tanh(), torch.nn.Sigmoid(),
                                 torch.nn.ReLU(), torch.nn.GELU(), torch.nn.LeakyReLU(0.2), torch.nn.Flatten(),
                                 torch.nn.Identity(), torch.nn.Sequential(torch.nn.Linear(8, 1)),
                                 torch.nn.CrossEntropyLoss(), torch.nn.MSELoss())
    assert repr(ours) == repr(theirs)
    assert repr(_Net(device)).replace("_Net", "Net") == repr(_TorchNet()).replace("_TorchNet", "Net")


def test_sequential_indexing_modes_and_zero_grad(device):
    model = _mlp(device)
    assert len(model) == 3 and isinstance(model[1], nn.ReLU) and model[-1] is model[2]
    tail, ttail = model[1:], _torch_mlp()[1:]
    assert [n for n, _ in tail.named_parameters()] == [n for n, _ in ttail.named_parameters()] == ["2.weight",
                                                                                                  "2.bias"]
    with pytest.raises(IndexError):
        model[3]
    with pytest.raises(TypeError, match="not a Module"):
        nn.Sequential(nn.ReLU(), lambda x: x)
    assert model.append(nn.Tanh()) is model and len(model) == 4
    assert model.eval() is model and not any(m.training for m in model.modules())
    assert model.train() is model and all(m.training for m in model.modules())
    model(wg.randn(4, 3, device=device)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(not _np(p.grad).any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_to_moves_parameters(device):
    other = "webgpu" if device == "cpu" else "cpu"
    model = _mlp(device)
    same = list(model.parameters())
    assert model.to(device) is model and all(a is b for a, b in zip(same, model.parameters()))
    values = [_np(p) for p in model.parameters()]
    model(wg.randn(2, 3, device=device)).sum().backward()
    model.to(other)
    for p, v in zip(model.parameters(), values):
        assert p.device == other and p.is_leaf and p.requires_grad and p.grad.device == other
        np.testing.assert_array_equal(_np(p), v)
    x = randn(4, 3)
    out = model(wg.tensor(x, device=other))
    assert out.device == other
    np.testing.assert_allclose(_np(out), _np(model.to(device)(wg.tensor(x, device=device))), rtol=1e-5, atol=1e-6)


def test_activations_and_losses_match_torch(device):
    x_np, g_np = randn(4, 3, 2), randn(4, 3, 2)
    pairs = [(nn.ReLU(), torch.nn.ReLU()), (nn.Tanh(), torch.nn.Tanh()), (nn.Sigmoid(), torch.nn.Sigmoid()),
             (nn.GELU(), torch.nn.GELU()), (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
             (nn.Identity(), torch.nn.Identity()), (nn.Flatten(), torch.nn.Flatten()),
             (nn.Flatten(0, 1), torch.nn.Flatten(0, 1)),
             (lambda t: nn.functional.softmax(t, 1), lambda t: torch.softmax(t, 1)),
             (lambda t: nn.functional.log_softmax(t, -1), lambda t: torch.log_softmax(t, -1))]
    for ours, theirs in pairs:
        x, tx = wg.tensor(x_np, device=device, requires_grad=True), torch.tensor(x_np, requires_grad=True)
        y, ty = ours(x), theirs(tx)
        assert tuple(y.shape) == tuple(ty.shape)
        np.testing.assert_allclose(_np(y), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
        (y * wg.tensor(g_np.reshape(y.shape), device=device)).sum().backward()
        (ty * torch.tensor(g_np.reshape(ty.shape))).sum().backward()
        np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-5)

    logits, labels, target = randn(6, 4), rng().integers(0, 4, 6).astype(np.int32), randn(6, 4)
    for reduction in ("mean", "sum", "none"):
        cases = [(nn.CrossEntropyLoss(reduction=reduction), torch.nn.CrossEntropyLoss(reduction=reduction), labels,
                  torch.tensor(labels).long()),
                 (nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), target, torch.tensor(target))]
        for ours, theirs, t_np, tt in cases:
            x, tx = wg.tensor(logits, device=device, requires_grad=True), torch.tensor(logits, requires_grad=True)
            loss, tloss = ours(x, wg.tensor(t_np, device=device)), theirs(tx, tt)
            np.testing.assert_allclose(_np(loss), tloss.detach().numpy(), rtol=1e-5, atol=1e-6)
            loss.sum().backward()
            tloss.sum().backward()
            np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_init_functions(device):
    t = nn.Parameter(wg.zeros(200, 300, device=device))
    assert init.uniform_(t, -2.0, 3.0) is t and t.is_leaf and t.requires_grad
    v = _np(t)
    assert v.min() >= -2 and v.max() < 3 and v.mean() == pytest.approx(0.5, abs=0.05)
    v = _np(init.normal_(t, 1.0, 2.0))
    assert v.mean() == pytest.approx(1.0, abs=0.05) and v.std() == pytest.approx(2.0, rel=0.03)
    assert (_np(init.zeros_(t)) == 0).all() and (_np(init.ones_(t)) == 1).all()
    assert (_np(init.constant_(t, 0.25)) == 0.25).all()
    for name, param in [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                        ("leaky_relu", None), ("leaky_relu", 0.3), ("selu", None)]:
        assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))
    bounds = [(lambda: init.kaiming_uniform_(t, a=math.sqrt(5)),
               torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3 / 300)),
              (lambda: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), math.sqrt(2 * 3 / 200)),
              (lambda: init.xavier_uniform_(t, gain=5 / 3), 5 / 3 * math.sqrt(6 / 500))]
    for fill, bound in bounds:
        peak = np.abs(_np(fill())).max()
        assert 0.98 * bound < peak <= bound
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.kaiming_uniform_(wg.zeros(5, device=device))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(t, mode="fan_avg")


def test_parameter_and_mlp(device):
    base = wg.randn(3, 4, device=device)
    p = nn.Parameter(base.T)   # a non-contiguous view becomes a contiguous leaf
    assert p.is_leaf and p.requires_grad and p.is_contiguous() and p.tolist() == base.T.tolist()
    model = nn.mlp([2, 5, 7, 3], "gelu", device=device)
    assert [type(m).__name__ for m in model] == ["Linear", "GELU", "Linear", "GELU", "Linear"]
    assert [tuple(p.shape) for p in model.parameters()] == [(5, 2), (5,), (7, 5), (7,), (3, 7), (3,)]
    assert model(wg.randn(4, 2, device=device)).shape == (4, 3)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        nn.mlp([2, 2], "swish")
