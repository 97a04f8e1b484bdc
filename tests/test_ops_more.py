"""More elementwise ops and reductions (ops/unary.py, ops/activation.py, ops/reduce.py), NaN
semantics by bits, and creation fidelity (linspace, arange, float64 data), against torch and
finite differences on both devices."""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import (assert_close, check_op, distinct, integers, nonzero, positive, randn, resolve_shape, rng, tag,
                      uniform, wg_tensor)

SHAPES = [(), (257,), (3, 5, 7), "random"]


def _away(x, points, margin=0.02):
    """x with the values within margin of any of points moved off them (no kink inside a finite
    difference's step)."""
    for p in points:
        x = np.where(np.abs(x - p) < margin, x + 3 * margin, x)
    return x.astype(np.float32)


def _away_from_halves(*shape):
    """Values whose rounding is not on a knife edge (finite differences step over no jump)."""
    x = randn(*shape) * 3
    return (np.floor(x) + uniform(*shape, low=0.05, high=0.45) + rng().integers(0, 2, shape) * 0.5).astype(np.float32)


# name -> (webgrad fn, torch fn or None for the same, input maker)
UNARY = {
    "log2": (lambda x: x.log2(), None, positive),
    "log10": (lambda x: wg.log10(x), lambda x: torch.log10(x), positive),
    "log1p": (lambda x: x.log1p(), None, lambda *s: uniform(*s, low=-0.9, high=3.0)),
    "log1p_tiny": (lambda x: x.log1p(), None, lambda *s: randn(*s) * 1e-5),
    "expm1": (lambda x: x.expm1(), None, lambda *s: randn(*s) * 2),
    "expm1_tiny": (lambda x: wg.expm1(x), lambda x: torch.expm1(x), lambda *s: randn(*s) * 1e-5),
    "sin": (lambda x: x.sin(), None, lambda *s: randn(*s) * 3),
    "cos": (lambda x: wg.cos(x), lambda x: torch.cos(x), lambda *s: randn(*s) * 3),
    "tan": (lambda x: x.tan(), None, lambda *s: uniform(*s, low=-1.3, high=1.3)),
    "asin": (lambda x: x.asin(), None, lambda *s: uniform(*s, low=-0.95, high=0.95)),
    "acos": (lambda x: wg.arccos(x), lambda x: torch.arccos(x), lambda *s: uniform(*s, low=-0.95, high=0.95)),
    "atan": (lambda x: x.atan(), None, lambda *s: randn(*s) * 4),
    "rsqrt": (lambda x: x.rsqrt(), None, positive),
    "reciprocal": (lambda x: x.reciprocal(), None, lambda *s: nonzero(*s, margin=0.3)),
    "square": (lambda x: x.square(), None, randn),
    "erf": (lambda x: x.erf(), None, lambda *s: randn(*s) * 2),
    "frac": (lambda x: x.frac(), None, _away_from_halves),
    "floor": (lambda x: x.floor(), None, _away_from_halves),
    "ceil": (lambda x: wg.ceil(x), lambda x: torch.ceil(x), _away_from_halves),
    "trunc": (lambda x: x.trunc(), None, _away_from_halves),
    "round": (lambda x: x.round(), None, _away_from_halves),
    "round_decimals": (lambda x: x.round(decimals=2), None, lambda *s: _away_from_halves(*s) / 100),
    "silu": (lambda x: F.silu(x), lambda x: TF.silu(x), lambda *s: randn(*s) * 4),
    "softplus": (lambda x: F.softplus(x), lambda x: TF.softplus(x), lambda *s: randn(*s) * 10),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 5.0), lambda x: TF.softplus(x, 2.0, 5.0),
                      lambda *s: nonzero(*s) * 4),
    "elu": (lambda x: F.elu(x), lambda x: TF.elu(x), lambda *s: nonzero(*s) * 3),
    "elu_alpha": (lambda x: F.elu(x, 0.7), lambda x: TF.elu(x, 0.7), lambda *s: nonzero(*s) * 3),
    "logsigmoid": (lambda x: F.logsigmoid(x), lambda x: TF.logsigmoid(x), lambda *s: randn(*s) * 10),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"),
                  lambda *s: randn(*s) * 3),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.7), lambda x: TF.hardtanh(x, -0.5, 0.7),
                 lambda *s: _away(randn(*s), (-0.5, 0.7))),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape, device):
    fn, torch_fn, make = UNARY[name]
    check_op(fn, make(*resolve_shape(shape)), device=device, torch_fn=torch_fn)


def test_small_arguments_keep_relative_precision(device):
    """log1p, expm1 and erf near 0, and log2/log10 near 1, where the builtin forms lose digits."""
    x = (np.sign(randn(200)) * 10.0 ** uniform(200, low=-30, high=-1)).astype(np.float32)
    near_one = (1 + randn(200) * 1e-3).astype(np.float32)
    for name, data in (("log1p", x), ("expm1", x), ("erf", x), ("sin", x), ("atan", x), ("asin", x),
                       ("log2", near_one), ("log10", near_one)):
        got = getattr(wg, name)(wg.tensor(data, device=device)).numpy().astype(np.float64)
        expected = getattr(torch, name)(torch.from_numpy(data).double()).numpy()
        rel = np.abs(got - expected) / np.abs(expected)
        assert rel.max() < 2e-6, tag(f"{name}: relative error {rel.max():.2e} at {data[np.argmax(rel)]!r}")


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "square", "sign", "abs"])
def test_integer_inputs_keep_their_dtype(name, device):
    x = integers(4, 5, low=-50, high=50)
    check_op(lambda t: getattr(t, name)(), x, device=device, grad=False)


def test_rounding_halves_to_even_and_int_errors(device):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], np.float32)
    assert wg.tensor(x, device=device).round().tolist() == torch.round(torch.from_numpy(x)).tolist()
    with pytest.raises(NotImplementedError):
        wg.tensor([1, 2], device=device).frac()
    with pytest.raises(NotImplementedError):
        torch.tensor([1, 2]).frac()


def test_float_tests_and_nan_to_num(device):
    x = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3e38, -1e-30], np.float32)
    t, ref = wg.tensor(x, device=device), torch.from_numpy(x)
    for name in ("isnan", "isinf", "isfinite"):
        assert getattr(t, name)().tolist() == getattr(ref, name)().tolist(), tag(name)
    assert_close(t.nan_to_num(), ref.nan_to_num())
    assert_close(wg.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-2.0), torch.nan_to_num(ref, 1.0, 2.0, -2.0))
    assert wg.tensor([3, -2**31], device=device).isnan().tolist() == [False, False]   # int bits are not NaN


def test_isclose_allclose(device):
    a = randn(40)
    b = (a + randn(40) * 1e-6 * rng().integers(0, 30, 40)).astype(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, np.inf, 1.0, np.nan], np.float32)
    other = np.array([np.inf, np.inf, np.nan, 1e38, np.inf, 0.0], np.float32)
    for x, y in ((a, b), (special, other)):
        for kw in ({}, {"rtol": 1e-3, "atol": 1e-6}, {"equal_nan": True}):
            t, u = wg.tensor(x, device=device), wg.tensor(y, device=device)
            expected = torch.isclose(torch.from_numpy(x), torch.from_numpy(y), **kw)
            assert t.isclose(u, **kw).tolist() == expected.tolist(), tag(f"isclose {kw}")
            assert wg.allclose(t, u, **kw) == torch.allclose(torch.from_numpy(x), torch.from_numpy(y), **kw)


# ---- NaN: propagated as torch does, checked by bits (np.isnan of the values read back) ----
def _nan_pattern(x):
    return np.isnan(np.asarray(x, np.float32))


def test_nan_propagation(device):
    x = randn(6, 7)
    x[rng().random((6, 7)) < 0.3] = np.nan
    x[2] = np.nan
    y = randn(6, 7)
    y[rng().random((6, 7)) < 0.3] = np.nan
    t, u, tx, ty = wg.tensor(x, device=device), wg.tensor(y, device=device), torch.from_numpy(x), torch.from_numpy(y)
    lo, hi = wg.tensor(y[:, :1], device=device), torch.from_numpy(y[:, :1])
    cases = {
        "relu": (t.relu(), tx.relu()), "max": (t.max(), tx.max()), "min": (t.min(), tx.min()),
        "amax(1)": (t.amax(1), tx.amax(1)), "amin(0)": (t.amin(0), tx.amin(0)),
        "max(1)": (t.max(1).values, tx.max(1).values), "min(0)": (t.min(0).values, tx.min(0).values),
        "maximum": (wg.maximum(t, u), torch.maximum(tx, ty)), "minimum": (wg.minimum(t, u), torch.minimum(tx, ty)),
        "max(a, b)": (wg.max(t, u), torch.max(tx, ty)), "min(a, b)": (t.min(u), tx.min(ty)),
        "clamp": (t.clamp(-0.5, 0.5), tx.clamp(-0.5, 0.5)),
        "clamp(tensors)": (t.clamp(lo, 1.0), tx.clamp(hi, torch.tensor(1.0))),
        "sign": (t.sign(), tx.sign()), "leaky_relu": (wg.leaky_relu(t), TF.leaky_relu(tx)),
    }
    for name, (got, expected) in cases.items():
        assert (_nan_pattern(got.numpy()) == _nan_pattern(expected.numpy())).all(), tag(f"{name}: NaN pattern")
        assert_close(np.nan_to_num(got.numpy(), nan=7.0), np.nan_to_num(expected.numpy(), nan=7.0), what=name)
    for name in ("argmax", "argmin"):
        assert getattr(t, name)().item() == getattr(tx, name)().item(), tag(name)
        assert getattr(t, name)(1).tolist() == getattr(tx, name)(1).tolist(), tag(f"{name}(1)")
    assert t.max(1).indices.tolist() == tx.max(1).indices.tolist()


def test_nan_in_a_two_pass_reduction(device):
    """Reductions too long for one pass keep a NaN through the second."""
    x = randn(3, 40000)
    at = rng().integers(0, 40000)
    x[1, at] = np.nan
    t = wg.tensor(x, device=device)
    assert np.isnan(t.max().item()) and np.isnan(t.amin(1).numpy()[1]) and not np.isnan(t.amax(1).numpy()[0])
    assert t.argmax(1).tolist()[1] == at and t.argmin().item() == 40000 + at


# ---- clamp and elementwise max/min with tensors ----
def test_clamp_tensor_bounds_match_torch_gradients(device):
    x = randn(4, 5)
    lo = uniform(4, 1, low=-1.0, high=0.0)
    hi = uniform(5, low=0.0, high=1.0)
    hi[0] = -2.0   # below lo: the result is hi, and lo gets no gradient there (as in torch)
    x[np.abs(x - lo) < 1e-2] += 0.05
    x[np.abs(x - hi) < 1e-2] += 0.05
    check_op(lambda t, a, b: t.clamp(a, b), x, lo, hi, device=device, fd=False)
    check_op(lambda t, a, b: wg.clamp(t, min=a, max=b), x, lo, np.abs(hi) + 0.1, device=device,
             torch_fn=lambda t, a, b: torch.clamp(t, min=a, max=b))
    check_op(lambda t: t.clamp(min=wg.tensor(0.2, device=t.device)), x, device=device,
             torch_fn=lambda t: t.clamp(min=torch.tensor(0.2)))
    with pytest.raises(RuntimeError):
        wg.tensor([1.0], device=device).clamp()


def test_max_min_of_two_tensors(device):
    a, b = distinct(3, 4), distinct(4)
    check_op(lambda x, y: wg.max(x, y) + wg.min(x, y) * 2, a, b, device=device,
             torch_fn=lambda x, y: torch.max(x, y) + torch.min(x, y) * 2)
    check_op(lambda x, y: x.max(y) - x.min(y), a, b, device=device)


# ---- reductions ----
# PyTorch's var/std forms: (dim, unbiased, keepdim) positionally, (unbiased) alone, correction= by keyword
VAR_CALLS = {
    "var(1, True)": lambda m, t: m.var(t, 1, True),
    "var(1, False, True)": lambda m, t: m.var(t, 1, False, True),
    "var(False)": lambda m, t: m.var(t, False),
    "std(True)": lambda m, t: m.std(t, True),
    "std(0, unbiased=False)": lambda m, t: m.std(t, 0, unbiased=False),
    "std(correction=0)": lambda m, t: m.std(t, correction=0),
    "var((0, 2), correction=2)": lambda m, t: m.var(t, (0, 2), correction=2),
    "std(-1, keepdim=True)": lambda m, t: m.std(t, -1, keepdim=True),
}


@pytest.mark.parametrize("call", list(VAR_CALLS))
def test_var_std_signatures(call, device):
    x = randn(4, 5, 3) + 1.0
    fn = VAR_CALLS[call]
    check_op(lambda t: fn(wg, t), x, device=device, torch_fn=lambda t: fn(torch, t))
    check_op(lambda t: fn(type(t), t), x, device=device, fd=False)   # the Tensor methods


def test_var_errors(device):
    t = wg.tensor(randn(3, 4), device=device)
    with pytest.raises(TypeError):
        t.var(0, unbiased=True, correction=1)
    with pytest.raises(TypeError):
        torch.randn(3, 4).var(0, unbiased=True, correction=1)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False), ((0, 2), True)])
def test_all_any(dim, keepdim, device):
    x = (rng().random((3, 4, 5)) < 0.8) * rng().integers(-2, 3, (3, 4, 5))
    x[1] = 1
    for dtype in (np.float32, np.int32, np.bool_):
        for op in ("all", "any"):
            kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
            got = getattr(wg_tensor(x.astype(dtype), device), op)(**kw)
            expected = getattr(torch.from_numpy(x.astype(dtype)), op)(**kw)
            assert got.dtype is wg.bool and got.tolist() == expected.tolist(), tag(f"{op}{kw} of {dtype}")
    empty = wg.zeros(0, 3, device=device)
    assert wg.all(empty).item() is True and wg.any(empty).item() is False
    assert empty.all(0).tolist() == [True] * 3 and empty.any(1).shape == (0,)


@pytest.mark.parametrize("zeros", [0, 1, 2])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod(zeros, dim, device):
    x = uniform(4, 5, low=0.5, high=1.5) * np.sign(randn(4, 5))
    for k in range(zeros):   # zeros in a row: one leaves a gradient on it, two none
        x[1, 2 * k] = 0.0
    kw = {} if dim is None else {"dim": dim}
    check_op(lambda t: t.prod(**kw), x, device=device, fd=False)
    check_op(lambda t: wg.prod(t, **kw), x.astype(np.float64), device="cpu", torch_fn=lambda t: torch.prod(t, **kw))
    check_op(lambda t: t.prod(1, keepdim=True), integers(3, 4, low=-3, high=4), device=device, grad=False)
    assert wg.zeros(0, 3, device=device).prod(0).tolist() == [1.0] * 3 and wg.ones(0, device=device).prod().item() == 1


@pytest.mark.parametrize("dim,keepdim", [(1, False), ((0, 2), True), (-1, True)])
def test_logsumexp(dim, keepdim, device):
    x = randn(3, 4, 5) * 5
    x[0, 0, 0] = 80.0   # exp would overflow without the max taken out
    check_op(lambda t: t.logsumexp(dim, keepdim), x, device=device)
    check_op(lambda t: wg.logsumexp(t, dim=dim, keepdim=keepdim), x, device=device,
             torch_fn=lambda t: torch.logsumexp(t, dim=dim, keepdim=keepdim), fd=False)
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [2.0, -np.inf]], np.float32)
    assert_close(wg.logsumexp(wg.tensor(x, device=device), 1), torch.logsumexp(torch.from_numpy(x), 1))


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, math.inf, -math.inf, 0, "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)])
def test_norm(p, dim, device):
    x = distinct(3, 4, 2) + 0.01   # no ties for the inf norms, no zeros for p < 1
    check_op(lambda t: t.norm(p, dim), x, device=device, grad=p != 0)   # (torch's 0-norm gradient is zeros)
    if p != "fro":
        check_op(lambda t: wg.linalg.vector_norm(t, p, dim, keepdim=True), x, device=device,
                 torch_fn=lambda t: torch.linalg.vector_norm(t, p, dim, keepdim=True), fd=False)


def test_norm_of_zeros_has_zero_gradient(device):
    for p in (2, 3, 1.5):
        t = wg.zeros(2, 3, device=device, requires_grad=True)
        t.norm(p).backward()
        ref = torch.zeros(2, 3, requires_grad=True)
        ref.norm(p).backward()
        assert_close(t.grad, ref.grad, what=f"p={p}")
    with pytest.raises(RuntimeError):
        wg.linalg.vector_norm(wg.tensor([1, 2], device=device))


# ---- creation ----
@pytest.mark.parametrize("args", [(0, 1, 5), (-3.5, 7.25, 11), (1, 0, 4), (2, 2, 3), (0, 1, 1), (0, 1, 0),
                                  (-1e3, 1e3, 1001), (0.1, 0.7, 257)])
def test_linspace(args, device):
    """PyTorch's formula in float32 (the ends exact); its vectorized loop may fuse a multiply-add, so
    an element may differ in the last bit."""
    got, expected = wg.linspace(*args, device=device), torch.linspace(*args)
    assert got.dtype is wg.float32 and got.shape == expected.shape
    assert_close(got, expected, atol=1e-6, rtol=3e-7, what=f"linspace{args}")
    if args[2]:
        assert got.tolist()[0] == expected.tolist()[0] and got.tolist()[-1] == expected.tolist()[-1], tag("ends")
    assert_close(wg.logspace(*args[:2], 7, device=device), torch.logspace(*args[:2], 7), rtol=1e-5)
    assert wg.linspace(0, 10, 6, dtype=wg.int32, device=device).tolist() == [0, 2, 4, 6, 8, 10]


def test_arange_fidelity(device):
    for args in [(0, 1, 0.1), (1, 2.5, 0.5), (10, 0, -3), (-1.0, 1.0, 0.25), (5.0,), (0, 7, 2)]:
        got, expected = wg.arange(*args, device=device), torch.arange(*args)
        assert got.dtype.is_floating_point == expected.dtype.is_floating_point
        assert_close(got, expected.numpy(), atol=1e-6, what=f"arange{args}")
    assert wg.arange(wg.tensor(4), device=device).tolist() == [0, 1, 2, 3]
    for bad in [(0, 10, -1), (5, 0, 1), (0, float("inf"))]:
        with pytest.raises(RuntimeError):
            wg.arange(*bad, device=device)
        with pytest.raises(RuntimeError):
            torch.arange(*bad)
    with pytest.raises(RuntimeError):
        wg.linspace(0, 1, -1, device=device)


def test_float64_data_keeps_every_digit():
    values = [0.1, 1 / 3, 1e-300, 123456789.123456789]
    t = wg.tensor(values, dtype=wg.float64, device="cpu")
    assert t.tolist() == values and t.dtype is wg.float64
    assert wg.tensor([[1, 2]], dtype=wg.float64).tolist() == [[1.0, 2.0]]
    with pytest.raises(TypeError, match="float64"):
        wg.tensor([0.1], dtype=wg.float64, device="webgpu")


def test_functional_gelu_approximate_errors(device):
    with pytest.raises(RuntimeError):
        F.gelu(wg.tensor([1.0], device=device), approximate="fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.gelu(wg.tensor([1.0], device=device), approximate="tanh")
