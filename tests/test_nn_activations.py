"""webgrad.nn's activation and reshaping modules and channel dropout against PyTorch on CPU (reprs,
errors, warnings, values and gradients), on both devices."""
import math

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn
from conftest import assert_close, check_op, randn, rng, tag, to_numpy, uniform
from torch_api import same_error


# ---- activations and reshaping modules ----
ACTIVATIONS = [  # (ours, torch's, input range)
    (lambda: nn.SiLU(), lambda: torch.nn.SiLU(), (-4, 4)),
    (lambda: nn.ELU(), lambda: torch.nn.ELU(), (-4, 4)),
    (lambda: nn.ELU(alpha=0.5), lambda: torch.nn.ELU(alpha=0.5), (-4, 4)),
    (lambda: nn.Softplus(), lambda: torch.nn.Softplus(), (-30, 30)),
    (lambda: nn.Softplus(beta=2, threshold=3), lambda: torch.nn.Softplus(beta=2, threshold=3), (-4, 4)),
    (lambda: nn.Mish(), lambda: torch.nn.Mish(), (-4, 4)),
    (lambda: nn.Hardtanh(), lambda: torch.nn.Hardtanh(), (-3, 3)),
    (lambda: nn.Hardtanh(-0.5, 2.0), lambda: torch.nn.Hardtanh(-0.5, 2.0), (-3, 3)),
    (lambda: nn.ReLU6(), lambda: torch.nn.ReLU6(), (-3, 9)),
    (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), (-4, 4)),
    (lambda: nn.LeakyReLU(0.2), lambda: torch.nn.LeakyReLU(0.2), (-3, 3)),
    (lambda: nn.Softmax(1), lambda: torch.nn.Softmax(1), (-3, 3)),
    (lambda: nn.LogSoftmax(dim=-1), lambda: torch.nn.LogSoftmax(dim=-1), (-3, 3)),
    (lambda: nn.Unflatten(1, (2, 3)), lambda: torch.nn.Unflatten(1, (2, 3)), (-1, 1)),
    (lambda: nn.Unflatten(-1, (-1, 2)), lambda: torch.nn.Unflatten(-1, (-1, 2)), (-1, 1)),
]


@pytest.mark.parametrize("ours,theirs,span", ACTIVATIONS, ids=[repr(t()) for _, t, _ in ACTIVATIONS])
def test_activation_modules_match_torch(device, ours, theirs, span):
    module, reference = ours(), theirs()
    assert repr(module) == repr(reference)
    x = uniform(4, 6, 2, low=span[0], high=span[1])
    check_op(lambda t: module(t), x, device=device, torch_fn=lambda t: reference(t))


def test_activation_reprs_and_implicit_softmax_dim(device):
    ours = nn.Sequential(nn.ReLU(inplace=True), nn.SiLU(inplace=True), nn.ELU(0.5, inplace=True),
                         nn.LeakyReLU(0.1, True), nn.Hardtanh(inplace=True), nn.ReLU6(True), nn.Mish(),
                         nn.Softplus(2, 10), nn.Softmax(), nn.LogSoftmax(), nn.GELU(), nn.Identity(7),
                         nn.Unflatten(1, [2, 2]), nn.Dropout1d(0.2), nn.Dropout2d(), nn.Dropout3d(0.1))
    theirs = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.SiLU(inplace=True),
                                 torch.nn.ELU(0.5, inplace=True), torch.nn.LeakyReLU(0.1, True),
                                 torch.nn.Hardtanh(inplace=True), torch.nn.ReLU6(True), torch.nn.Mish(),
                                 torch.nn.Softplus(2, 10), torch.nn.Softmax(), torch.nn.LogSoftmax(),
                                 torch.nn.GELU(), torch.nn.Identity(7), torch.nn.Unflatten(1, [2, 2]),
                                 torch.nn.Dropout1d(0.2), torch.nn.Dropout2d(), torch.nn.Dropout3d(0.1))
    assert repr(ours) == repr(theirs) == repr(nn.torch_equivalent(ours))
    x = wg.tensor(randn(3, 4), device=device)
    assert_close(ours[0](x), torch.relu(torch.tensor(x.numpy())), what="inplace=True gives the same values")
    for shape in [(5,), (3, 4), (2, 3, 4)]:
        x = randn(*shape)
        for module, reference in [(nn.Softmax(), torch.nn.Softmax()), (nn.LogSoftmax(), torch.nn.LogSoftmax())]:
            with pytest.warns(UserWarning, match="Implicit dimension choice"):
                got = module(wg.tensor(x, device=device))
            with pytest.warns(UserWarning):
                expected = reference(torch.tensor(x))
            assert_close(got, expected, what=f"{module} on {shape}")
    same_error(lambda: nn.GELU("fast")(wg.zeros(1, device=device)), lambda: torch.nn.GELU("fast")(torch.zeros(1)))
    same_error(lambda: nn.Unflatten(1, (2, 4))(wg.zeros(3, 6, device=device)),
                lambda: torch.nn.Unflatten(1, (2, 4))(torch.zeros(3, 6)))
    same_error(lambda: nn.Hardtanh(2, 1), lambda: torch.nn.Hardtanh(2, 1))


# ---- channel dropout ----
@pytest.mark.parametrize("kind,shape", [("Dropout1d", (40, 16, 5)), ("Dropout1d", (32, 7)),
                                        ("Dropout2d", (24, 20, 3, 4)), ("Dropout3d", (20, 16, 2, 3, 2)),
                                        ("Dropout3d", (40, 2, 3, 2))])
def test_channel_dropout_zeroes_whole_channels(device, kind, shape):
    p = float(rng().uniform(0.2, 0.6))
    module = getattr(nn, kind)(p)
    batched = len(shape) == {"Dropout1d": 3, "Dropout2d": 4, "Dropout3d": 5}[kind]
    x_np, g_np = uniform(*shape, low=0.5, high=1.5), randn(*shape)
    x = wg.tensor(x_np, device=device, requires_grad=True)
    y = module(x)
    (y * wg.tensor(g_np, device=device)).sum().backward()
    channels = shape[:2] if batched else shape[:1]
    scale = to_numpy(y) * (1 - p) / x_np          # 0 or 1 everywhere, the same across each channel
    per_channel = scale.reshape(*channels, -1)
    assert np.allclose(per_channel, per_channel[..., :1], atol=1e-5), tag("a channel was partly dropped")
    kept = per_channel[..., 0]
    assert np.all(np.isclose(kept, 0, atol=1e-5) | np.isclose(kept, 1, atol=1e-5)), tag(f"scales {np.unique(kept)}")
    dropped = float(np.isclose(kept, 0, atol=1e-5).mean())
    assert abs(dropped - p) < 4 * math.sqrt(p * (1 - p) / kept.size) + 0.02, tag(f"dropped {dropped} for p={p}")
    assert_close(x.grad, g_np * scale / (1 - p), 1e-5, 1e-5, "gradient: the same mask, scaled")
    np.testing.assert_array_equal(to_numpy(module.eval()(x)), x_np)
    np.testing.assert_array_equal(to_numpy(getattr(nn, kind)(0.0)(x)), x_np)
    assert not to_numpy(getattr(nn, kind)(1.0)(x)).any()


def test_channel_dropout_errors_and_warnings_match_torch(device):
    F, TF = nn.functional, torch.nn.functional
    same_error(lambda: F.dropout1d(wg.zeros(2, 2, 2, 2, device=device)), lambda: TF.dropout1d(torch.zeros(2, 2, 2, 2)))
    same_error(lambda: nn.Dropout2d(1.5), lambda: torch.nn.Dropout2d(1.5))
    for fn, torch_fn in [(F.dropout2d, TF.dropout2d), (F.dropout3d, TF.dropout3d)]:
        for ndim in (2, 3):
            with pytest.warns(UserWarning) as ours:
                fn(wg.zeros(*(2,) * ndim, device=device))
            with pytest.warns(UserWarning) as theirs:
                torch_fn(torch.zeros(*(2,) * ndim))
            assert [str(w.message)[:60] for w in ours] == [str(w.message)[:60] for w in theirs], tag(f"{fn} {ndim}D")
