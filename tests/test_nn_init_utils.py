"""webgrad.nn.init and webgrad.nn.utils against PyTorch on CPU: signatures, the inits' spread and
distributions, orthogonal's Q, and gradient clipping, on both devices."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn
from webgrad.nn import init
from conftest import assert_close, randn, rng, tag, to_numpy
from torch_api import same_error, signature


# ---- init ----
def test_signatures_match_torch():
    for name in ["uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "xavier_uniform_",
                 "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "calculate_gain"]:
        assert signature(getattr(init, name)) == signature(getattr(torch.nn.init, name)), name
    for name in ["silu", "elu", "mish", "hardtanh", "relu6", "dropout1d", "dropout2d", "dropout3d"]:
        assert signature(getattr(nn.functional, name)) == signature(getattr(torch.nn.functional, name)), name
    for name in ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
                 "parameters_to_vector", "vector_to_parameters"]:
        assert signature(getattr(nn.utils, name)) == signature(getattr(torch.nn.utils, name)), name
    for owner, names in [("Module", ["named_parameters", "named_buffers", "named_modules", "parameters", "modules",
                                     "load_state_dict", "register_buffer", "register_parameter", "add_module",
                                     "zero_grad", "train", "apply", "requires_grad_", "to", "type"]),
                         ("ModuleList", ["__init__", "append", "extend", "insert", "pop"]),
                         ("ModuleDict", ["__init__", "update", "pop"]), ("ParameterList", ["__init__", "append"]),
                         ("ParameterDict", ["__init__", "update", "setdefault", "get", "fromkeys", "pop"])]:
        for name in names:
            assert signature(getattr(getattr(nn, owner), name)) == \
                signature(getattr(getattr(torch.nn, owner), name)), f"{owner}.{name}"
    for name in ["ELU", "Softplus", "ReLU6", "LeakyReLU", "SiLU", "Mish", "GELU", "Softmax", "LogSoftmax",
                 "Unflatten", "Dropout1d", "Dropout2d", "Dropout3d", "RNNCell", "LSTMCell", "GRUCell"]:
        assert signature(getattr(nn, name).__init__) == signature(getattr(torch.nn, name).__init__), name


def _fill(device, shape=(300, 200)):
    return nn.Parameter(wg.zeros(*shape, device=device))


def test_normal_inits_have_torchs_spread(device):
    t = _fill(device)   # fan_in 200, fan_out 300
    for fill, std in [(lambda: init.xavier_normal_(t, gain=2.0), 2.0 * math.sqrt(2 / 500)),
                      (lambda: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 300)),
                      (lambda: init.kaiming_normal_(t, a=0.3), torch.nn.init.calculate_gain("leaky_relu", 0.3)
                       / math.sqrt(200))]:
        v = to_numpy(fill())
        assert abs(v.mean()) < 0.03 * std and v.std() == pytest.approx(std, rel=0.02), tag(f"std {v.std()} vs {std}")
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        init.kaiming_normal_(wg.zeros(0, 3, device=device))
    with pytest.raises(NotImplementedError, match="generator"):
        init.normal_(t, generator=torch.Generator())
    assert init.calculate_gain("conv_transpose2d") == torch.nn.init.calculate_gain("conv_transpose2d")
    same_error(lambda: init.calculate_gain("leaky_relu", "x"), lambda: torch.nn.init.calculate_gain("leaky_relu",
                                                                                                      "x"))
    same_error(lambda: init.kaiming_normal_(t, mode="fan_avg"), lambda: torch.nn.init.kaiming_normal_(
        torch.zeros(3, 2), mode="fan_avg"))


def test_trunc_normal_matches_torchs_distribution(device):
    mean, std = float(rng().uniform(-1, 1)), float(rng().uniform(0.5, 2))
    a, b = mean - float(rng().uniform(0.2, 2)) * std, mean + float(rng().uniform(0.2, 3)) * std
    ours = to_numpy(init.trunc_normal_(_fill(device, (400, 500)), mean, std, a, b)).ravel().astype(np.float64)
    theirs = torch.nn.init.trunc_normal_(torch.empty(400, 500), mean, std, a, b).numpy().ravel()
    # float32 values: the bounds as float32 holds them (seed 1295786108 rounded a clamp at a 1.7e-8 below it)
    assert ours.min() >= np.float32(a) and ours.max() <= np.float32(b)
    grid = np.linspace(a, b, 101)
    cdf_gap = np.abs(np.searchsorted(np.sort(ours), grid) - np.searchsorted(np.sort(theirs), grid)).max() / ours.size
    assert cdf_gap < 0.01, tag(f"empirical CDFs differ by {cdf_gap}")   # two-sample KS; 1e-2 is ~7 sigma here
    # and against the closed form of the truncated normal's mean
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    expected_mean = mean + std * (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    assert ours.mean() == pytest.approx(expected_mean, abs=0.01 * std)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3), (7, 7)])
def test_orthogonal_is_the_q_of_torchs_qr(device, shape):
    gain = float(rng().uniform(0.5, 2))
    rows, cols = shape[0], math.prod(shape[1:])
    s = int(rng().integers(2 ** 31))
    wg.manual_seed(s)
    drawn = wg.randn(rows, cols, device=device).numpy().astype(np.float64)   # the draw orthogonal_ makes
    wg.manual_seed(s)
    t = init.orthogonal_(nn.Parameter(wg.zeros(*shape, device=device)), gain=gain)
    q = to_numpy(t).reshape(rows, cols).astype(np.float64)
    # torch.nn.init.orthogonal_'s recipe on the same draw: QR of the tall one, signs from R's diagonal
    tall = drawn.T if rows < cols else drawn
    qr_q, qr_r = np.linalg.qr(tall)
    expected = qr_q * np.sign(np.diag(qr_r))
    expected = (expected.T if rows < cols else expected) * gain
    np.testing.assert_allclose(q, expected, atol=1e-4, err_msg=tag("orthogonal_ vs QR"))
    gram = q @ q.T if rows < cols else q.T @ q
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(rows, cols)), atol=1e-4)
    same_error(lambda: init.orthogonal_(wg.zeros(3, device=device)), lambda: torch.nn.init.orthogonal_(
        torch.zeros(3)))


def test_eye(device):
    t = init.eye_(nn.Parameter(wg.zeros(3, 5, device=device)))
    np.testing.assert_array_equal(to_numpy(t), torch.nn.init.eye_(torch.zeros(3, 5)).numpy())
    assert t.requires_grad and t.is_leaf
    same_error(lambda: init.eye_(wg.zeros(2, 2, 2, device=device)), lambda: torch.nn.init.eye_(torch.zeros(2, 2, 2)))


# ---- nn.utils ----
def _params_with_grads(device):
    shapes = [(3, 4), (5,), (2, 2, 2)]
    values = [randn(*s) for s in shapes]
    grads = [randn(*s) * float(rng().uniform(0.1, 3)) for s in shapes]
    ours = [nn.Parameter(wg.tensor(v, device=device)) for v in values]
    theirs = [torch.nn.Parameter(torch.tensor(v)) for v in values]
    for p, t, g in zip(ours, theirs, grads):
        p.grad, t.grad = wg.tensor(g, device=device), torch.tensor(g)
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 0.5, 3, "inf"])
def test_clip_grad_norm_matches_torch(device, norm_type):
    for max_norm in (float(rng().uniform(0.05, 0.5)), 1e6):   # clipping, and not
        ours, theirs = _params_with_grads(device)
        extra = nn.Parameter(wg.ones(2, device=device))     # no grad: skipped, as in torch
        total = nn.utils.clip_grad_norm_(iter(ours + [extra]), max_norm, norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
        assert isinstance(total, wg.Tensor) and total.device == device and total.shape == ()
        assert_close(total, expected, what=f"total norm {norm_type}")
        for k, (p, t) in enumerate(zip(ours, theirs)):
            assert_close(p.grad, t.grad, what=f"clipped gradient {k}")
        assert extra.grad is None
    one = nn.Parameter(wg.tensor(randn(4), device=device))
    one.grad = wg.tensor(randn(4) * 10, device=device)
    assert float(nn.utils.clip_grad_norm_(one, 1.0)) > 1 and float((one.grad * one.grad).sum()) == pytest.approx(
        1.0, rel=1e-4)
    assert float(nn.utils.clip_grad_norm_([], 1.0)) == float(torch.nn.utils.clip_grad_norm_([], 1.0)) == 0.0


def test_clipping_reads_nothing_back(device, monkeypatch):
    ours, _ = _params_with_grads(device)
    reads = []
    download = wg.Tensor._host_bytes
    monkeypatch.setattr(wg.Tensor, "_host_bytes", lambda self: reads.append(1) or download(self))
    total = nn.utils.clip_grad_norm_(ours, 0.1)
    nn.utils.clip_grad_value_(ours, 0.01)
    assert not reads, tag("clipping read values back to the host")
    assert float(total) > 0 and len(reads) == 1
    ours, theirs = _params_with_grads(device)
    ours[1].grad, theirs[1].grad = ours[1].grad * float("nan"), theirs[1].grad * float("nan")
    same_error(lambda: nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True),
                lambda: torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True))


def test_clip_grad_value_and_vectors_match_torch(device):
    ours, theirs = _params_with_grads(device)
    clip = float(rng().uniform(0.1, 1))
    assert nn.utils.clip_grad_value_(ours, clip) is None and torch.nn.utils.clip_grad_value_(theirs, clip) is None
    for k, (p, t) in enumerate(zip(ours, theirs)):
        assert_close(p.grad, t.grad, what=f"clamped gradient {k}")
    vec = nn.utils.parameters_to_vector(ours)
    assert_close(vec, torch.nn.utils.parameters_to_vector(theirs), what="parameters_to_vector")
    new = randn(vec.shape[0])
    nn.utils.vector_to_parameters(wg.tensor(new, device=device), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for k, (p, t) in enumerate(zip(ours, theirs)):
        assert_close(p, t, what=f"vector_to_parameters {k}")
        assert isinstance(p, nn.Parameter) and p.is_leaf
    same_error(lambda: nn.utils.vector_to_parameters([1.0], ours),
                lambda: torch.nn.utils.vector_to_parameters([1.0], theirs))
