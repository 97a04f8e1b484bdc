"""Elementwise ops, forward and backward, on both devices, against torch, NumPy and finite differences."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import webgrad as wg
from conftest import (BINARY_SHAPES, broadcast_partner, random_shape, UNARY_SHAPES, assert_close, check_op, integers, nonzero, positive, randn,
                      resolve_pair, resolve_shape, rng, tag, to_numpy, uniform, wg_tensor)


# ---- binary arithmetic with broadcasting ----
def _binary_inputs(name, sa, sb):
    if name == "div":
        return randn(*sa), nonzero(*sb, margin=0.5)
    if name == "pow":
        return positive(*sa), uniform(*sb, low=-2, high=2)
    if name in ("maximum", "minimum"):
        a = randn(*sa)
        b = randn(*sb)
        # keep the pair at least 1e-3 apart so neither finite differences nor ties blur the winner
        gap = np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape)) - a
        if np.any(np.abs(gap) < 1e-3):
            return _binary_inputs(name, sa, sb)
        return a, b
    return randn(*sa), randn(*sb)


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
}


@pytest.mark.parametrize("shapes", BINARY_SHAPES)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes, device):
    sa, sb = resolve_pair(shapes)
    fn, np_fn = BINARY[name]
    a, b = _binary_inputs(name, sa, sb)
    check_op(fn, a, b, device=device, np_fn=np_fn)


def test_binary_functional_forms(device):
    a, b = randn(3, 4), nonzero(4, margin=0.5)
    check_op(lambda x, y: x.add(y).sub(y * 2).mul(x).div(y), a, b, device=device)
    check_op(lambda x, y: wg.maximum(x, y) - wg.minimum(x, y) + wg.pow(x.abs() + 0.1, y),
             a, b, device=device, torch_fn=lambda x, y: torch.maximum(x, y) - torch.minimum(x, y) +
             torch.pow(x.abs() + 0.1, y))


SCALAR_CASES = {
    "x+s": (lambda x: x + 2.5, randn),
    "s+x": (lambda x: 2.5 + x, randn),
    "x-s": (lambda x: x - 1.25, randn),
    "s-x": (lambda x: 1.25 - x, randn),
    "x*s": (lambda x: x * -3.0, randn),
    "s*x": (lambda x: 0.5 * x, randn),
    "x/s": (lambda x: x / 4.0, randn),
    "s/x": (lambda x: 1.0 / x, lambda *s: nonzero(*s, margin=0.3)),
    "x*int": (lambda x: x * 3, randn),
    "x**2": (lambda x: x ** 2, randn),              # negative bases, even integer exponent
    "x**3": (lambda x: x ** 3, randn),              # negative bases, odd integer exponent
    "x**-2": (lambda x: x ** -2, lambda *s: nonzero(*s, margin=0.5)),
    "x**-1.0": (lambda x: x ** -1.0, lambda *s: nonzero(*s, margin=0.5)),
    "x**0": (lambda x: x ** 0, randn),
    "x**0.5": (lambda x: x ** 0.5, positive),
    "x**1.7": (lambda x: x ** 1.7, positive),
    "2**x": (lambda x: 2 ** x, randn),
    "0.5**x": (lambda x: 0.5 ** x, randn),
}


@pytest.mark.parametrize("shape", [(257,), (3, 5, 7), ()])
@pytest.mark.parametrize("case", list(SCALAR_CASES))
def test_scalar_operands(case, shape, device):
    fn, make = SCALAR_CASES[case]
    check_op(fn, make(*shape), device=device)


def test_pow_negative_base_integer_exponent_tensor(device):
    base = nonzero(4, 5, margin=0.3)
    exponent = rng().integers(-3, 4, (4, 5)).astype(np.float32)
    out = check_op(lambda a, b: a ** b, base, exponent, device=device, grad=(0,), np_fn=np.power)
    assert np.all(np.isfinite(out[0])), tag("negative base ** integer exponent gave NaN/inf")


def test_pow_negative_base_fractional_exponent_is_nan(device):
    out = (wg.tensor([-2.0, -0.5], device=device) ** 0.5).numpy()
    assert np.all(np.isnan(out)), tag(f"(-x)**0.5 should be NaN as in torch, got {out}")


# ---- unary ----
UNARY = {
    "neg": (lambda x: -x, None, randn, np.negative),
    "neg_method": (lambda x: x.neg(), None, randn, np.negative),
    "exp": (lambda x: x.exp(), None, randn, np.exp),
    "log": (lambda x: x.log(), None, positive, np.log),
    "sqrt": (lambda x: x.sqrt(), None, positive, np.sqrt),
    "abs": (lambda x: x.abs(), None, nonzero, np.abs),
    "abs_builtin": (lambda x: abs(x), None, nonzero, np.abs),
    "relu": (lambda x: x.relu(), None, nonzero, lambda x: np.maximum(x, 0)),
    "leaky_relu": (lambda x: wg.leaky_relu(x), lambda x: F.leaky_relu(x), nonzero, None),
    "leaky_relu_0.2": (lambda x: wg.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2), nonzero,
                       lambda x: np.where(x > 0, x, 0.2 * x)),
    "tanh": (lambda x: x.tanh(), None, lambda *s: 3 * randn(*s), np.tanh),
    "sigmoid": (lambda x: x.sigmoid(), None, lambda *s: 4 * randn(*s), lambda x: 1 / (1 + np.exp(-x))),
    "gelu": (lambda x: wg.gelu(x), lambda x: F.gelu(x), lambda *s: 3 * randn(*s), None),
    "functional": (lambda x: wg.exp(wg.tanh(x)) + wg.sqrt(wg.abs(x)) + wg.log(wg.sigmoid(x)) + wg.relu(x),
                   lambda x: torch.exp(torch.tanh(x)) + torch.sqrt(torch.abs(x)) + torch.log(torch.sigmoid(x))
                   + torch.relu(x), nonzero, None),
}


@pytest.mark.parametrize("shape", UNARY_SHAPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape, device):
    fn, torch_fn, make, np_fn = UNARY[name]
    check_op(fn, make(*resolve_shape(shape)), device=device, torch_fn=torch_fn, np_fn=np_fn)


def test_sign(device):
    x = nonzero(3, 5)
    x[0, 0] = 0.0
    check_op(lambda t: wg.sign(t), x, device=device, torch_fn=torch.sign, np_fn=np.sign, grad=False)


@pytest.mark.parametrize("op", ["tanh", "sigmoid", "gelu"])
def test_saturating_activations_at_large_inputs(op, device):
    x = np.array([-1e4, -1000, -100, -50, -20, -15.5, 15.5, 20, 50, 100, 1000, 1e4], np.float32)
    fn = {"tanh": lambda t: t.tanh(), "sigmoid": lambda t: t.sigmoid(), "gelu": lambda t: wg.gelu(t)}[op]
    torch_fn = {"gelu": lambda t: F.gelu(t)}.get(op)
    out = check_op(fn, x, device=device, torch_fn=torch_fn, atol=1e-6, fd=False)[0]
    t = wg_tensor(x, device, requires_grad=True)
    fn(t).sum().backward()
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(to_numpy(t.grad))), tag(f"{op}: NaN/inf at large |x|")


def test_gelu_is_the_exact_erf_form(device):
    x = np.linspace(-6, 6, 1001).astype(np.float32)
    check_op(lambda t: wg.gelu(t), x, device=device, torch_fn=lambda t: F.gelu(t), atol=1e-5, rtol=1e-5, fd=False)
    approx = F.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    exact = wg.gelu(wg.tensor(x, device=device)).numpy()
    assert np.abs(approx - exact).max() > 1e-4, tag("gelu matches the tanh approximation, not the exact form")


# ---- clamp ----
def _away_from(x, points, margin=0.02):
    """Nudge values that lie within `margin` of any of `points` (scalars or broadcastable arrays)."""
    for p in points:
        near = np.abs(x - p) < margin
        x = np.where(near, x + 3 * margin, x)
    return x.astype(np.float32)


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (-0.5, None), (None, 0.3), (0, 1)])
@pytest.mark.parametrize("shape", [(257,), (3, 5, 7), ()])
def test_clamp_scalar_bounds(bounds, shape, device):
    lo, hi = bounds
    x = _away_from(randn(*shape), [b for b in bounds if b is not None])
    check_op(lambda t: t.clamp(lo, hi), x, device=device, torch_fn=lambda t: t.clamp(lo, hi),
             np_fn=lambda a: np.clip(a, -np.inf if lo is None else lo, np.inf if hi is None else hi))
    check_op(lambda t: wg.clamp(t, min=lo, max=hi), x, device=device,
             torch_fn=lambda t: torch.clamp(t, min=lo, max=hi), fd=False)


def test_clamp_keyword_forms_and_alias(device):
    x = _away_from(randn(4, 6), [-0.2, 0.4])
    check_op(lambda t: t.clamp(min=-0.2), x, device=device)
    check_op(lambda t: t.clamp(max=0.4), x, device=device)
    check_op(lambda t: t.clip(-0.2, 0.4), x, device=device)


@pytest.mark.parametrize("sides", ["both", "min", "max"])
def test_clamp_tensor_bounds(sides, device):
    x = randn(3, 5, 7)
    lo = uniform(5, 1, low=-1.0, high=-0.1)       # broadcast bounds
    hi = uniform(7, low=0.1, high=1.0)
    x = _away_from(_away_from(x, [lo]), [np.broadcast_to(hi, x.shape)])
    if sides == "both":
        check_op(lambda t, a, b: t.clamp(a, b), x, lo, hi, device=device)
    elif sides == "min":
        check_op(lambda t, a: t.clamp(min=a), x, lo, device=device)
    else:
        check_op(lambda t, b: t.clamp(max=b), x, hi, device=device)


def test_clamp_int_tensor(device):
    x = integers(20, low=-10, high=10)
    check_op(lambda t: t.clamp(-3, 4), x, device=device)
    check_op(lambda t: t.clamp(min=0), x, device=device)


def test_clamp_needs_a_bound(device):
    with pytest.raises(RuntimeError, match="min.*max"):   # torch's type and message
        wg.tensor([1.0], device=device).clamp()


# ---- where ----
@pytest.mark.parametrize("shapes", [((257,), (257,), (257,)), ((3, 5, 7), (5, 1), (7,)), ((4, 1), (1, 6), ()),
                                    "random"])
def test_where(shapes, device):
    if shapes == "random":
        sx = random_shape()
        shapes = (broadcast_partner(sx), sx, broadcast_partner(sx))
    sc, sx, sy = shapes
    cond = rng().random(sc) < 0.5
    check_op(lambda c, a, b: wg.where(c, a, b), np.asarray(cond), randn(*sx), randn(*sy), device=device,
             torch_fn=lambda c, a, b: torch.where(c, a, b), np_fn=np.where)


def test_where_with_scalars_and_comparison_condition(device):
    x = nonzero(6, 7)
    check_op(lambda a: wg.where(a > 0, a, 0.0), x, device=device, torch_fn=lambda a: torch.where(a > 0, a, 0.0))
    check_op(lambda a: wg.where(a < 0, 1.5, a * 2), x, device=device,
             torch_fn=lambda a: torch.where(a < 0, 1.5, a * 2))


# ---- comparisons and logical ops ----
COMPARISONS = {
    "eq": (lambda a, b: a == b, lambda a, b: a.eq(b)),
    "ne": (lambda a, b: a != b, lambda a, b: a.ne(b)),
    "lt": (lambda a, b: a < b, lambda a, b: a.lt(b)),
    "le": (lambda a, b: a <= b, lambda a, b: a.le(b)),
    "gt": (lambda a, b: a > b, lambda a, b: a.gt(b)),
    "ge": (lambda a, b: a >= b, lambda a, b: a.ge(b)),
}


def _small_ints_as_float(*shape):
    return rng().integers(-2, 3, shape).astype(np.float32)  # many ties, so == and <= are exercised


@pytest.mark.parametrize("form", [0, 1])
@pytest.mark.parametrize("name", list(COMPARISONS))
def test_comparisons(name, form, device):
    fn = COMPARISONS[name][form]
    sa, sb = resolve_pair("random")
    for a, b in [(_small_ints_as_float(*sa), _small_ints_as_float(*sb)),
                 (_small_ints_as_float(257), _small_ints_as_float(257)),
                 (integers(3, 5, low=-2, high=3), integers(5, low=-2, high=3))]:
        out = check_op(fn, a, b, device=device, grad=False)[0]
        assert out.dtype == np.bool_, tag(f"{name} gave {out.dtype}")
    check_op(lambda a: fn(a, 1.0), _small_ints_as_float(4, 6), device=device, grad=False)
    check_op(lambda a: fn(a, 1), integers(4, 6, low=-2, high=3), device=device, grad=False)


def test_comparison_results_do_not_require_grad(device):
    x = wg_tensor(randn(5), device, requires_grad=True)
    for out in (x > 0, x == x, x.le(0.5), x != 1.0):
        assert out.dtype is wg.bool and not out.requires_grad and out.grad_fn is None


LOGICAL = {
    "and": (lambda a, b: wg.logical_and(a, b), lambda a, b: torch.logical_and(a, b)),
    "or": (lambda a, b: wg.logical_or(a, b), lambda a, b: torch.logical_or(a, b)),
    "&": (lambda a, b: a & b, None),
    "|": (lambda a, b: a | b, None),
}


@pytest.mark.parametrize("name", list(LOGICAL))
def test_logical_binary(name, device):
    fn, torch_fn = LOGICAL[name]
    sa, sb = resolve_pair("random")
    a, b = rng().random(sa) < 0.5, rng().random(sb) < 0.5
    out = check_op(fn, np.asarray(a), np.asarray(b), device=device, torch_fn=torch_fn, grad=False)[0]
    assert out.dtype == np.bool_
    if torch_fn is not None:  # logical_* also take numbers: nonzero is true
        x, y = _small_ints_as_float(257), _small_ints_as_float(257)
        check_op(fn, x, y, device=device, torch_fn=torch_fn, grad=False)


def test_logical_not(device):
    mask = np.asarray(rng().random((3, 5, 7)) < 0.5)
    check_op(lambda m: ~m, mask, device=device, grad=False)
    check_op(lambda m: wg.logical_not(m), mask, device=device, torch_fn=torch.logical_not, grad=False)
    check_op(lambda x: wg.logical_not(x), _small_ints_as_float(40), device=device,
             torch_fn=torch.logical_not, grad=False)


def test_masks_combine_into_arithmetic(device):
    x = nonzero(5, 6)
    check_op(lambda a: a * ((a > -0.5) & (a < 0.5)) + a.relu() * (a > 1), x, device=device)


# ---- dtypes of elementwise results ----
def test_integer_arithmetic_stays_integer(device):
    a, b = integers(4, 5, low=-50, high=50), integers(5, low=1, high=9)
    for fn in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: -x + y * 3,
               lambda x, y: x.maximum(y), lambda x, y: x.minimum(y), lambda x, y: x.abs()):
        out = check_op(fn, a, b, device=device, grad=False)[0]
        assert out.dtype == np.int32, tag(f"int32 op gave {out.dtype}")


def test_mixed_dtype_promotion(device):
    i, f = integers(3, 4, low=-5, high=5), randn(3, 4)
    check_op(lambda x, y: x + y, i, f, device=device)            # int + float -> float
    check_op(lambda x: x * 0.5, i, device=device)                # int * python float -> float
    check_op(lambda x, y: x / y, i, integers(4, low=1, high=5), device=device)  # true division
    assert (wg_tensor(i, device) / 2).dtype is wg.float32
    assert (wg_tensor(i, device) + 2).dtype is wg.int32
    assert wg_tensor(i, device).exp().dtype is wg.float32
    b = np.asarray(rng().random((3, 4)) < 0.5)
    check_op(lambda m, y: m * y, b, f, device=device)            # bool * float -> float (a mask)


@pytest.mark.parametrize("target", ["int", "float", "bool"])
def test_casts(target, device):
    x = 5 * randn(4, 7)
    x[0, :3] = [2.7, -2.7, 0.0]
    fn = {"int": lambda t: t.int(), "float": lambda t: t.int().float(), "bool": lambda t: t.bool()}[target]
    check_op(fn, x, device=device, grad=False)
    check_op(lambda m: m.float() * 2 + m.int(), np.asarray(x > 0), device=device, grad=False)


def test_cast_float_passes_gradient(device):
    x = randn(3, 4)
    check_op(lambda t: (t.float() * 2).exp(), x, device=device, fd=False)  # .float() rounds float64


# ---- views as elementwise operands ----
def test_elementwise_on_strided_views(device):
    a, b = randn(6, 8), randn(8, 6)
    check_op(lambda x, y: x.mT * y + x.T.exp(), a, b, device=device)
    check_op(lambda x, y: x[::2, 1::3] - y[1:7:2, ::3].mT.mT, a, randn(8, 6).T.copy(), device=device)
    check_op(lambda x, y: x.unsqueeze(0).expand(3, 6, 8) * y.permute(1, 0), a, b, device=device)


def test_large_and_odd_sizes(device):
    for n in (1, 255, 256, 257, 4097):
        check_op(lambda x, y: (x * y + x).tanh(), randn(n), randn(n), device=device, fd_points=4)


def test_broadcast_shape_mismatch_raises(device):
    a, b = wg_tensor(randn(3, 4), device), wg_tensor(randn(5), device)
    with pytest.raises(RuntimeError, match="broadcast"):
        a + b
    with pytest.raises(RuntimeError):
        a * wg_tensor(randn(2, 4), device)
    assert_close(wg.broadcast_shapes((3, 1), (1, 4)), np.array([3, 4]))


def test_long_queue_of_dispatches_flushes_in_order(device):
    # many more dispatches than the runtime queues before a forced submit (MAX_QUEUED)
    t = wg.tensor(np.zeros(300, np.float32), device=device)
    for _ in range(1100):
        t = t + 1.0
    assert_close(t, np.full(300, 1100.0, np.float32), what="1100 chained adds")
