"""Property-based tests of elementwise ops, reductions, matmul and casts: each op runs on the test's
device on hypothesis' cases (tests/fuzzing.py: shapes, broadcast pairs, dims, values from 1e-30 to
1e30 where an op's result stays in float32's range) and is compared with a float64 NumPy oracle.
Indexing: test_fuzz_indexing.py; softmax, cross_entropy and gradients against torch:
test_fuzz_gradients.py; the bugs the fuzzer found, as fixed cases: test_fuzz_regressions.py."""
import math

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

import webgrad as wg
from conftest import tag
from fuzzing import (assert_matches, assert_raises_like_torch, broadcast_pair, dims_for, fuzz, matmul_cases, on,
                     reduced_dims, shapes, values)


# ---- elementwise ----
def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


# name -> (webgrad fn, float64 oracle, rtol, error scale or None for |expected|)
UNARY = {
    "neg": (lambda t: -t, np.negative, 0, None),
    "abs": (lambda t: t.abs(), np.abs, 0, None),
    "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), 0, None),
    "sign": (lambda t: wg.sign(t), np.sign, 0, None),
    "exp": (lambda t: t.exp(), np.exp, 2e-5, None),
    "log": (lambda t: t.log(), np.log, 5e-7, None),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, 2e-6, None),
    "tanh": (lambda t: t.tanh(), np.tanh, 3e-7, None),
    "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), 2e-5, None),
    "leaky_relu": (lambda t: wg.leaky_relu(t, 0.2), lambda x: np.where(x > 0, x, 0.2 * x), 2e-7, None),
    # the erf approximation (A&S 7.1.26) is good to 1.5e-7 absolute, so relative to |x|
    "gelu": (lambda t: wg.gelu(t), _gelu, 4e-7, lambda x: np.abs(x)),
    "clamp": (lambda t: t.clamp(-0.5, 2e3), lambda x: np.clip(x, -0.5, 2e3), 0, None),
}
INT_UNARY = ("neg", "abs", "relu", "sign", "exp", "sqrt", "clamp")


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _np_sigmoid(x):
    return np.exp(-np.logaddexp(0, -x))


# ops/unary.py and ops/activation.py (trigonometry is left to test_ops_more: 1e30 radians are not
# what a GPU's sin is for)
UNARY.update({
    "floor": (lambda t: t.floor(), np.floor, 0, None),
    "ceil": (lambda t: t.ceil(), np.ceil, 0, None),
    "round": (lambda t: t.round(), np.round, 0, None),
    "trunc": (lambda t: t.trunc(), np.trunc, 0, None),
    "frac": (lambda t: t.frac(), lambda x: x - np.trunc(x), 0, None),
    "square": (lambda t: t.square(), np.square, 2e-7, None),
    "reciprocal": (lambda t: t.reciprocal(), lambda x: 1 / x, 3e-7, None),
    "rsqrt": (lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x), 4e-7, None),
    "log2": (lambda t: t.log2(), np.log2, 5e-7, None),
    "log10": (lambda t: t.log10(), np.log10, 5e-7, None),
    "log1p": (lambda t: t.log1p(), np.log1p, 5e-7, None),
    "expm1": (lambda t: t.expm1(), np.expm1, 2e-5, None),
    "erf": (lambda t: t.erf(), _np_erf, 4e-7, None),
    "atan": (lambda t: t.atan(), np.arctan, 5e-7, None),
    "asin": (lambda t: t.asin(), np.arcsin, 5e-7, None),
    "silu": (lambda t: wg.nn.functional.silu(t), lambda x: x * _np_sigmoid(x), 2e-5, None),
    "softplus": (lambda t: wg.nn.functional.softplus(t), lambda x: np.where(x > 20, x, np.logaddexp(0, x)), 2e-5,
                 None),
    "logsigmoid": (lambda t: wg.nn.functional.logsigmoid(t), lambda x: -np.logaddexp(0, -x), 2e-5, None),
    "elu": (lambda t: wg.nn.functional.elu(t), lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), 2e-5, None),
})
INT_UNARY = INT_UNARY + ("floor", "ceil", "round", "trunc", "square")


@st.composite
def unary_cases(draw):
    name = draw(st.sampled_from(sorted(UNARY)))
    dtype = draw(st.sampled_from([np.float32, np.float32, np.int32])) if name in INT_UNARY else np.float32
    shape = draw(shapes())
    return name, draw(values(shape, dtype=dtype))


@fuzz(unary_cases())
def test_unary(device, case):
    name, x = case
    fn, oracle, rtol, scale = UNARY[name]
    x64 = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    with np.errstate(all="ignore"):
        expected = oracle(x64)
    if x.dtype.kind == "i" and expected.dtype.kind == "i":
        expected = expected.astype(np.int32)   # int32 wraps (-(-2**31) is -2**31, as in torch)
    assert_matches(fn(on(device, x)), expected, rtol, None if scale is None else scale(x64), name)


# name -> (webgrad fn, NumPy fn on the promoted float64/int64 operands, rtol)
BINARY = {
    "add": (lambda a, b: a + b, np.add, 2e-7),
    "sub": (lambda a, b: a - b, np.subtract, 2e-7),
    "mul": (lambda a, b: a * b, np.multiply, 2e-7),
    "div": (lambda a, b: a / b, np.divide, 3e-7),
    "maximum": (lambda a, b: wg.maximum(a, b), np.maximum, 0),
    "minimum": (lambda a, b: wg.minimum(a, b), np.minimum, 0),
    "eq": (lambda a, b: a == b, np.equal, 0),
    "ne": (lambda a, b: a != b, np.not_equal, 0),
    "lt": (lambda a, b: a < b, np.less, 0),
    "le": (lambda a, b: a <= b, np.less_equal, 0),
    "gt": (lambda a, b: a > b, np.greater, 0),
    "ge": (lambda a, b: a >= b, np.greater_equal, 0),
}
TENSOR_ONLY = ("maximum", "minimum")   # torch.maximum takes two tensors


@st.composite
def binary_cases(draw):
    """op, operand a, operand b: NumPy arrays (float32 or int32) or Python numbers, broadcastable."""
    name = draw(st.sampled_from(sorted(BINARY)))
    shape_a, shape_b = draw(broadcast_pair())
    lo, hi = (-15, 15) if name == "mul" and draw(st.booleans()) else (-30, 30)   # mostly no overflow
    scalar_at = draw(st.sampled_from([None, None, 0, 1])) if name not in TENSOR_ONLY else None
    operands = []
    for position, shape in enumerate((shape_a, shape_b)):
        if position == scalar_at:
            operands.append(draw(st.one_of(st.integers(-7, 7), st.sampled_from([0.5, -2.0, 1e-20, 3e25]),
                                           st.sampled_from([2**31, -2**31 - 5, 2**40 + 3]))))   # int32 wraps
        else:
            operands.append(draw(values(shape, lo, hi, draw(st.sampled_from([np.float32, np.float32, np.int32])))))
    return name, operands[0], operands[1]


def _promote(operands, floating):
    """The operands in the compute dtype by PyTorch's rules (floats win; Python numbers only decide int
    vs float), then widened to float64 / int64 for the oracle."""
    arrays = [o for o in operands if isinstance(o, np.ndarray)]
    is_float = floating or any(o.dtype.kind == "f" for o in arrays) or any(isinstance(o, float) for o in operands)
    dtype = np.float32 if is_float else np.int32
    return [np.asarray(o).astype(dtype).astype(np.float64 if is_float else np.int64) for o in operands]


@fuzz(binary_cases())
def test_binary(device, case):
    name, a, b = case
    fn, oracle, rtol = BINARY[name]
    a64, b64 = _promote([a, b], floating=name == "div")
    with np.errstate(all="ignore"):
        expected = oracle(a64, b64)
    if expected.dtype.kind == "i":
        expected = expected.astype(np.int32)   # int32 arithmetic wraps
    def wrap(v):
        return on(device, v) if isinstance(v, np.ndarray) else v
    assert_matches(fn(wrap(a), wrap(b)), expected, rtol, what=name)


@st.composite
def where_cases(draw):
    shape_a, shape_b = draw(broadcast_pair())
    shape_c = draw(st.sampled_from([shape_a, shape_b, shape_a[1:], ()]))
    return draw(values(shape_c, dtype=np.bool_)), draw(values(shape_a)), draw(values(shape_b))


@fuzz(where_cases())
def test_where(device, case):
    c, a, b = case
    assert_matches(wg.where(on(device, c), on(device, a), on(device, b)), np.where(c, a, b).astype(np.float64),
                   0, what="where")


@st.composite
def pow_cases(draw):
    shape_a, shape_b = draw(broadcast_pair())
    base = draw(values(shape_a, -10, 10))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    exponent = rng.choice(np.float32([-3, -2, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3]), shape_b)
    return base, (draw(st.sampled_from([2.0, -1.0, 0.5, 3])) if draw(st.booleans()) else exponent)


@fuzz(pow_cases())
def test_pow(device, case):
    """Negative bases keep the sign for odd integer exponents and give NaN for fractional ones."""
    base, exponent = case
    with np.errstate(all="ignore"):
        expected = np.power(base.astype(np.float64), np.asarray(exponent, np.float64))
    e = exponent if isinstance(exponent, (int, float)) else on(device, exponent)
    assert_matches(on(device, base) ** e, expected, 2e-5, what="pow")


# ---- reductions ----
@st.composite
def reduce_cases(draw):
    op = draw(st.sampled_from(["sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var"]))
    dtype = np.float32
    if op in ("sum", "argmax"):
        dtype = draw(st.sampled_from([np.float32, np.float32, np.int32, np.uint8, np.bool_]))
    elif op in ("amax", "amin"):
        dtype = draw(st.sampled_from([np.float32, np.int32]))
    # now and then more elements than one reduce workgroup takes in a pass
    shape = draw(shapes() if draw(st.integers(0, 9)) else st.sampled_from([(40000,), (3, 17000), (20001, 2)]))
    x = draw(values(shape, -15, 15, dtype) if op == "var" else values(shape, dtype=dtype))
    if op in ("argmax", "argmin"):
        dim = draw(st.one_of(st.none(), st.integers(-max(len(shape), 1), max(len(shape), 1) - 1)))
    elif op in ("max", "min"):
        dim = draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    else:
        dim = dims_for(draw, len(shape))
    return op, x, dim, draw(st.booleans()), draw(st.sampled_from([0, 1]))


@fuzz(reduce_cases())
def test_reduce(device, case):
    """Sums of nothing are 0 (means NaN); max/min/arg over an empty dim raise as in torch."""
    op, x, dim, keepdim, correction = case
    t = on(device, x)
    axes = reduced_dims(dim, x.ndim)
    kw = {"keepdim": keepdim}
    reduced = math.prod(x.shape[d] for d in axes)
    if op in ("amax", "amin", "max", "min", "argmax", "argmin") and reduced == 0:
        args = () if dim is None else (dim,)
        assert_raises_like_torch(lambda a: getattr(a, op)(*args, **kw), x, device, f"{op} of empty")
        return
    x64 = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)   # bool and uint8 sum as ints
    if op in ("argmax", "argmin"):
        flat = x64.reshape(-1) if dim is None else x64
        got = getattr(t, op)(dim, **kw)
        expected = getattr(np, op)(flat, axis=None if dim is None else axes[0] if x.ndim else None)
        shape = (1,) * x.ndim if dim is None else tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        expected = np.asarray(expected).reshape(shape if keepdim else np.shape(expected)).astype(np.int32)
        assert_matches(got, expected, what=op)
        return
    if op in ("max", "min"):
        values_, indices = getattr(t, op)(dim, **kw)
        np_axis = axes[0] if x.ndim else None
        assert_matches(values_, np.asarray(getattr(np, "a" + op)(x64, axis=np_axis, keepdims=keepdim)), 0, what=op)
        arg = np.asarray(getattr(np, "arg" + op)(x64, axis=np_axis))
        assert_matches(indices, (np.expand_dims(arg, axes) if keepdim and x.ndim else arg).astype(np.int32),
                       what=f"{op} indices")
        return
    got = (t.var(dim, keepdim=keepdim, correction=correction) if op == "var" else getattr(t, op)(dim, **kw))
    with np.errstate(all="ignore"):
        if op == "var":
            count = reduced - correction
            mean = x64.sum(axis=axes, keepdims=True) / reduced if reduced else np.nan
            expected = ((x64 - mean) ** 2).sum(axis=axes, keepdims=keepdim) / (count if count > 0 else np.nan)
            scale = (x64 ** 2).sum(axis=axes, keepdims=keepdim) / max(count, 1)
        else:
            expected = getattr(np, "sum" if op == "mean" else op)(x64, axis=axes, keepdims=keepdim)
            if op == "mean":
                expected = expected / reduced   # a mean of nothing is 0 / 0, quietly
            scale = np.abs(x64).sum(axis=axes, keepdims=keepdim) / (reduced if op == "mean" and reduced else 1)
    if x.dtype.kind != "f":
        expected = expected.astype(np.int32)   # int32 sums wrap
    # float32 sums (NumPy's along a strided axis too) add one by one: error grows with the count
    assert_matches(got, expected, 1e-5 + 1e-6 * math.sqrt(reduced), scale, what=op)


@st.composite
def bad_dims_cases(draw):
    shape = draw(shapes(min_ndim=1, min_side=1))   # not empty: torch checks emptiness before dims
    dims = list(draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3)))
    if draw(st.booleans()):
        dims.append(draw(st.sampled_from([len(shape), -len(shape) - 1, len(shape) + 3])))
    elif len({d % len(shape) for d in dims}) == len(dims):
        dims.append(dims[0] - len(shape) if dims[0] >= 0 else dims[0] + len(shape))   # the same dim twice
    return draw(values(shape)), tuple(dims), draw(st.sampled_from(["sum", "mean", "amax", "amin"]))


@fuzz(bad_dims_cases())
def test_reduce_bad_dims(device, case):
    """A dim out of range is an IndexError, a repeated dim a RuntimeError, as in torch."""
    x, dims, op = case
    t = on(device, x)
    with pytest.raises((IndexError, RuntimeError)) as info:
        getattr(t, op)(dims)
    out_of_range = any(not -x.ndim <= d < x.ndim for d in dims)
    assert isinstance(info.value, IndexError if out_of_range else RuntimeError), tag(f"{op}{dims}: {info.value!r}")
    with pytest.raises(type(info.value)):
        getattr(torch.tensor(x), op)(dims)


# ---- matmul ----
@fuzz(matmul_cases())
def test_matmul(device, case):
    a, b = case
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_matches(on(device, a) @ on(device, b), a64 @ b64, 1e-5, np.abs(a64) @ np.abs(b64), "matmul")


@st.composite
def cast_cases(draw):
    source = draw(st.sampled_from([np.float32, np.int32, np.uint8, np.bool_]))
    target = draw(st.sampled_from([wg.float32, wg.int32, wg.bool]))
    # floats stay inside int32's range: beyond it the conversion is undefined (in torch too)
    x = draw(values(draw(shapes()), -30, 9, source))
    return x, target


@fuzz(cast_cases())
def test_cast(device, case):
    """Casts as in torch: floats truncate toward zero to ints, anything nonzero is True."""
    x, target = case
    expected = x.astype({wg.float32: np.float32, wg.int32: np.int32, wg.bool: np.bool_}[target])
    assert_matches(on(device, x).to(target), expected.astype(np.float64) if target is wg.float32 else expected, 0,
                   what=f"{x.dtype} to {target.name}")
