"""Property-based tests: hypothesis draws shapes (empty and size-1 dims included), broadcast pairs,
reduction dims, index expressions and values from 1e-30 to 1e30 (where an op's result stays in
float32's range); each op runs on the test's device and is compared with a float64 NumPy oracle.
A subset also checks gradients against torch (conftest.check_op).

Hypothesis is seeded from conftest's per-test seed, so `WEBGRAD_TEST_SEED=<seed> pytest -k <id>`
(with the same WEBGRAD_FUZZ_EXAMPLES) replays a failure. WEBGRAD_FUZZ_EXAMPLES=N sets the examples per
property (default 25: the fast slice in `make test`); bench/fuzz.py runs thousands and counts them
in CASES. Bugs the fuzzer found are kept as fixed cases at the end.
"""
import collections
import math
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings, strategies as st

import webgrad as wg
from conftest import check_op, seed, tag

EXAMPLES = int(os.environ.get("WEBGRAD_FUZZ_EXAMPLES", "25"))
CASES = collections.Counter()   # examples run per property (read by bench/fuzz.py)

F32_MAX = float(np.finfo(np.float32).max)
TINY = float(np.finfo(np.float32).tiny)   # GPUs may flush subnormal results to zero


def fuzz(strategy):
    """Turns body(device, case) into a test on both devices that runs it on EXAMPLES cases drawn
    from `strategy`, with hypothesis seeded from the test's WEBGRAD_TEST_SEED."""
    def wrap(body):
        def test(device):
            @settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=False,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
            @given(case=strategy)
            def run(case):
                CASES[body.__name__] += 1
                body(device, case)
            hypothesis_seed(seed())(run)()
        test.__name__ = body.__name__
        test.__doc__ = body.__doc__
        return test
    return wrap


# ---- strategies ----
SIDES = st.one_of(st.integers(0, 5), st.integers(1, 3), st.sampled_from([1, 7, 65, 257]))


@st.composite
def shapes(draw, min_ndim=0, max_ndim=4, max_numel=3000, min_side=0):
    """Shapes with size-0 and size-1 dims, and now and then a side past a workgroup (65, 257)."""
    shape = [max(s, min_side) for s in draw(st.lists(SIDES, min_size=min_ndim, max_size=max_ndim))]
    while math.prod(shape) > max_numel:
        shape[shape.index(max(shape))] //= 4
    return tuple(shape)


@st.composite
def broadcast_pair(draw, max_ndim=4, max_numel=1500):
    """Two shapes that broadcast, in either order: one drops some leading dims of the other and sets
    some dims to 1; the other may in turn have 1s where the first has sizes."""
    full = list(draw(shapes(max_ndim=max_ndim, max_numel=max_numel)))
    drop = draw(st.integers(0, len(full)))
    part = [1 if draw(st.booleans()) else s for s in full[drop:]]
    for d, size in enumerate(part):
        if size != 1 and draw(st.integers(0, 3)) == 0:
            full[drop + d] = 1
    return (tuple(full), tuple(part)) if draw(st.booleans()) else (tuple(part), tuple(full))


@st.composite
def values(draw, shape, lo=-30, hi=30, dtype=np.float32):
    """An array of `shape` and dtype, maybe as a strided view. Floats: signed magnitudes 10**e with e
    in a drawn sub-range of [lo, hi] (an array may span 60 decades or sit near 1), some zeros, some
    ties. int32: small or anywhere in the int32 range (arithmetic wraps, as in torch); uint8, bool."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = math.prod(shape)
    if np.dtype(dtype).kind == "i":
        bound = draw(st.sampled_from([3, 1000, 2**31]))
        return strided(draw, rng.integers(-bound, bound, shape, dtype=np.int64).astype(np.int32))
    if np.dtype(dtype).kind == "b":
        return strided(draw, rng.random(shape) < 0.5)
    if np.dtype(dtype).kind == "u":
        return strided(draw, rng.integers(0, 256, shape, dtype=np.uint8))
    a = draw(st.integers(lo, hi - 1))
    b = draw(st.integers(a + 1, hi))
    x = np.sign(rng.standard_normal(n)) * 10.0 ** rng.uniform(a, b, n)
    zeros = draw(st.sampled_from([0.0, 0.0, 0.2]))
    x[rng.random(n) < zeros] = 0.0
    if n and draw(st.booleans()):   # ties: a few distinct values only
        x = rng.choice(x[:3], n)
    return strided(draw, x.astype(dtype).reshape(shape))


def strided(draw, x):
    """Now and then x's values as a non-contiguous NumPy view (dims permuted in memory, every other
    element used, or one row repeated with stride 0); `on` uploads such a view as a webgrad view with
    the same strides, so the kernels' strided paths are fuzzed too."""
    if x.ndim == 0 or not draw(st.integers(0, 2)) == 0:
        return x
    if draw(st.integers(0, 3)) == 0:   # stride 0, as expand() makes
        d = draw(st.integers(0, x.ndim - 1))
        return np.broadcast_to(x.take([0], axis=d), x.shape) if x.shape[d] else x
    perm = draw(st.permutations(range(x.ndim)))
    steps = tuple(draw(st.sampled_from([1, 2])) for _ in perm)
    big = np.zeros([x.shape[d] * step for d, step in zip(perm, steps)], x.dtype)
    window = tuple(slice(None, None, step) for step in steps)
    big[window] = x.transpose(perm)
    return big[window].transpose(np.argsort(perm))


def dims_for(draw, ndim, allow_none=True):
    """A reduction's dim argument: None, one dim, or a tuple/list of distinct dims, some negative."""
    if allow_none and draw(st.booleans()) and draw(st.booleans()):
        return draw(st.sampled_from([None, (), []]))   # torch: an empty dim list means every dim
    picked = draw(st.lists(st.integers(0, max(ndim, 1) - 1), unique=True, min_size=1, max_size=max(ndim, 1)))
    picked = [d - max(ndim, 1) if draw(st.booleans()) else d for d in picked]
    if len(picked) == 1 and draw(st.booleans()):
        return picked[0]
    return tuple(picked) if draw(st.booleans()) else picked


# ---- the oracle comparison ----
def assert_matches(actual, expected, rtol=2e-6, scale=None, what=""):
    """A webgrad result against the float64 (or int64 / bool) NumPy oracle: same shape and dtype kind;
    ints and bools equal; floats with NaN where the oracle has NaN, and elsewhere within
    rtol * scale (scale defaults to |expected|; sums pass sum |x|) plus float32's smallest normal,
    where results beyond float32's range count as inf."""
    assert isinstance(actual, wg.Tensor), tag(f"{what}: got {type(actual).__name__}, not a Tensor")
    got = actual.numpy()
    expected = np.asarray(expected)
    assert got.shape == expected.shape, tag(f"{what}: shape {got.shape}, expected {expected.shape}")
    kind = {"f": "f", "i": "i", "u": "i", "b": "b"}
    assert kind[got.dtype.kind] == kind[expected.dtype.kind], tag(
        f"{what}: dtype {actual.dtype.name}, expected a {expected.dtype} kind")
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected, err_msg=tag(what))
        return
    got, expected = got.astype(np.float64), expected.astype(np.float64)
    nan = np.isnan(expected)
    bad = np.isnan(got) != nan
    edge = F32_MAX * (1 + rtol)   # clipping makes inf and a value near float32's max agree
    diff = np.abs(np.clip(got, -edge, edge) - np.clip(expected, -edge, edge))
    bound = TINY + rtol * (np.abs(expected) if scale is None else np.broadcast_to(scale, expected.shape))
    with np.errstate(invalid="ignore"):
        bad |= ~nan & ~(diff <= bound)
    if bad.any():
        at = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise AssertionError(tag(f"{what}: {int(bad.sum())} of {bad.size} elements differ; first at {at}: "
                                 f"got {got[at]!r}, expected {expected[at]!r}"))


def assert_raises_like_torch(call, x, device, what):
    """call(tensor) raises a RuntimeError or IndexError with a message on webgrad, and torch raises too."""
    with pytest.raises((RuntimeError, IndexError)) as info:
        call(on(device, x))
    assert str(info.value), tag(f"{what}: {type(info.value).__name__} without a message")
    with pytest.raises((RuntimeError, IndexError)):
        call(torch.tensor(x))


def on(device, a):
    """NumPy array -> webgrad tensor with the array's layout: a view with positive strides becomes a
    view of the same strides, at an offset into its storage."""
    a = np.asarray(a)
    if a.flags.c_contiguous or a.size == 0:
        return wg.tensor(a, device=device)
    item = a.itemsize
    strides = tuple(st // item for st in a.strides)
    span = sum((size - 1) * st for size, st in zip(a.shape, strides)) + 1
    flat = np.lib.stride_tricks.as_strided(a, (span,), (item,))   # the memory a's elements lie in
    offset = a.size % 3
    storage = wg.tensor(np.concatenate([np.zeros(offset, a.dtype), flat]), device=device)
    return wg.Tensor(storage._storage, a.shape, storage.dtype, device, strides, offset)


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


def _axes(dim, ndim):
    """The sorted, wrapped dims a reduction's dim argument names (a 0-d tensor has none)."""
    if not ndim:
        return ()
    if dim is None or dim == () or dim == []:
        return tuple(range(ndim))
    return tuple(sorted({d % ndim for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}))


@fuzz(reduce_cases())
def test_reduce(device, case):
    """Sums of nothing are 0 (means NaN); max/min/arg over an empty dim raise as in torch."""
    op, x, dim, keepdim, correction = case
    t = on(device, x)
    axes = _axes(dim, x.ndim)
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
@st.composite
def matmul_cases(draw):
    """(*batch, m, k) @ (*batch', k, n) with broadcast batches, 1-D operands and empty sizes; factors up to
    1e15 so that products stay in float32's range."""
    m, k, n = (draw(st.one_of(st.integers(0, 4), st.sampled_from([1, 17, 33]))) for _ in range(3))
    batch_a, batch_b = draw(broadcast_pair(max_ndim=2, max_numel=8))
    shape_a = (k,) if draw(st.integers(0, 5)) == 0 else batch_a + (m, k)
    shape_b = (k,) if draw(st.integers(0, 5)) == 0 else batch_b + (k, n)
    return draw(values(shape_a, -15, 15)), draw(values(shape_b, -15, 15))


@fuzz(matmul_cases())
def test_matmul(device, case):
    a, b = case
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_matches(on(device, a) @ on(device, b), a64 @ b64, 1e-5, np.abs(a64) @ np.abs(b64), "matmul")


# ---- indexing and slicing ----
@st.composite
def index_cases(draw):
    """A tensor (maybe a permuted view) and a basic index: ints, slices with any start/stop and positive
    steps, None and one Ellipsis; or a list of ints as the sole index."""
    shape = draw(shapes(max_ndim=4))
    x = draw(values(shape, -3, 3))
    perm = draw(st.permutations(range(len(shape))))
    sizes = [shape[d] for d in perm]
    if sizes and draw(st.integers(0, 3)) == 0:   # positions along dim 0, maybe none
        first = sizes[0]
        return x, perm, draw(st.lists(st.integers(-first, first - 1), max_size=4) if first else st.just([]))
    cut = draw(st.integers(0, len(sizes)))     # items for dims [0, cut), the Ellipsis, items for [resume, ndim)
    resume = draw(st.integers(cut, len(sizes))) if draw(st.booleans()) else None
    dims = list(range(cut)) + ([] if resume is None else [Ellipsis] + list(range(resume, len(sizes))))
    items = []
    for d in dims:
        while draw(st.integers(0, 5)) == 0:
            items.append(None)
        if d is Ellipsis:
            items.append(Ellipsis)
        elif sizes[d] and draw(st.integers(0, 2)) == 0:
            items.append(draw(st.integers(-sizes[d], sizes[d] - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-sizes[d] - 2, sizes[d] + 2))
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, 5]))))
    return x, perm, tuple(items) if len(items) != 1 or draw(st.booleans()) else items[0]


@fuzz(index_cases())
def test_getitem(device, case):
    x, perm, index = case
    view = np.transpose(x, perm)
    got = on(device, x).permute(perm)[index]
    assert_matches(got, view[index].astype(np.float64), 0, what=f"x{list(perm)}[{index}]")


@st.composite
def bad_index_cases(draw):
    shape = draw(shapes(min_ndim=1, max_ndim=3))
    d = draw(st.integers(0, len(shape) - 1))
    items = [slice(None)] * d
    kind = draw(st.sampled_from(["negative step", "out of range", "too many"]))
    if kind == "negative step":
        items.append(slice(draw(st.one_of(st.none(), st.integers(-3, 3))), None, draw(st.integers(-3, -1))))
    elif kind == "out of range":
        items.append(draw(st.sampled_from([shape[d], shape[d] + 2, -shape[d] - 1])))
    else:
        items = [0] * len(shape) + [0]
    return draw(values(shape, -3, 3)), tuple(items), kind


@fuzz(bad_index_cases())
def test_getitem_errors(device, case):
    """As in torch: a negative step is a ValueError, an index past the end or too many indices an IndexError."""
    x, index, kind = case
    error = ValueError if kind == "negative step" else IndexError
    with pytest.raises(error, match="step must be greater than zero" if error is ValueError else None):
        on(device, x)[index]
    with pytest.raises(error):
        torch.tensor(x)[index]


@st.composite
def gather_cases(draw):
    """x, dim and an int32 index in range (torch allows no negative ones here): a 1-D index for
    index_select, or one of x's rank for gather (no larger than x outside dim)."""
    shape = draw(shapes(min_ndim=1, max_numel=1000))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[dim]
    select = draw(st.booleans())
    if select:
        index_shape = (draw(st.integers(0, 7)) if size else 0,)
    else:
        index_shape = tuple((draw(st.integers(0, 7)) if size else 0) if d == dim % len(shape) else
                            draw(st.integers(0, s)) for d, s in enumerate(shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    index = strided(draw, rng.integers(0, max(size, 1), index_shape).astype(np.int32))
    return draw(values(shape, -3, 3)), dim, index, select


@fuzz(gather_cases())
def test_gather_index_select(device, case):
    x, dim, index, select = case
    t, i = on(device, x), on(device, index)
    if select:
        assert_matches(t.index_select(dim, i), np.take(x, index, axis=dim).astype(np.float64), 0, what="index_select")
        return
    region = x[tuple(slice(None) if d == dim % x.ndim else slice(0, s) for d, s in enumerate(index.shape))]
    assert_matches(t.gather(dim, i), np.take_along_axis(region, index, axis=dim).astype(np.float64), 0,
                   what="gather")


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


# ---- cat and stack ----
@st.composite
def cat_cases(draw):
    base = list(draw(shapes(min_ndim=1, max_ndim=4, max_numel=600)))
    dim = draw(st.integers(-len(base), len(base) - 1))
    stack = draw(st.booleans())
    arrays = []
    for _ in range(draw(st.integers(1, 4))):
        shape = list(base)
        if not stack:
            shape[dim] = draw(st.sampled_from([0, 1, 2, 3, 5]))
        arrays.append(draw(values(tuple(shape), dtype=draw(st.sampled_from([np.float32, np.float32, np.int32])))))
    if stack:
        dim = draw(st.integers(-len(base) - 1, len(base)))
    return arrays, dim, stack


@fuzz(cat_cases())
def test_cat_stack(device, case):
    """Mixed int32/float32 inputs promote to float32, as in torch."""
    arrays, dim, stack = case
    out = (wg.stack if stack else wg.cat)([on(device, a) for a in arrays], dim)
    promoted = np.float32 if any(a.dtype.kind == "f" for a in arrays) else np.int32
    expected = (np.stack if stack else np.concatenate)([a.astype(promoted) for a in arrays], axis=dim)
    assert_matches(out, expected.astype(np.float64) if expected.dtype.kind == "f" else expected, 0,
                   what="stack" if stack else "cat")


# ---- softmax and cross_entropy ----
@st.composite
def softmax_cases(draw):
    shape = draw(shapes(max_numel=1500))
    return draw(values(shape)), draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1)), draw(st.booleans())


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@fuzz(softmax_cases())
def test_softmax(device, case):
    """Logits up to 1e30 apart: the row max is subtracted first, so nothing overflows."""
    x, dim, log = case
    t = on(device, x)
    axis = dim % x.ndim if x.ndim else None
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        expected = _log_softmax(x64, axis) if x.size else x64
    if log:
        assert_matches(t.log_softmax(dim), expected, 2e-5, np.abs(expected) + 1, "log_softmax")
    else:
        assert_matches(t.softmax(dim), np.exp(expected), 2e-5, np.exp(expected) + 1e-6, "softmax")


@st.composite
def cross_entropy_cases(draw):
    n, c = draw(st.integers(0, 6)), draw(st.integers(1, 7))
    batched = draw(st.booleans()) or n == 0
    shape = (n, c) if batched else (c,)
    logits = draw(values(shape, -30, 3))
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        target = rng.integers(0, c, shape[:-1]).astype(np.int32)
    else:
        target = draw(values(shape, -2, 0))
        target = np.abs(target) / np.maximum(np.abs(target).sum(-1, keepdims=True), 1e-30)
    return logits, target, draw(st.sampled_from(["mean", "sum", "none"])), \
        draw(st.sampled_from([0.0, 0.0, 0.1, 0.5]))


@fuzz(cross_entropy_cases())
def test_cross_entropy(device, case):
    """Against torch.nn.functional.cross_entropy in float64 (class indices and probabilities, label
    smoothing, every reduction, empty batches)."""
    logits, target, reduction, smoothing = case
    got = wg.nn.functional.cross_entropy(on(device, logits), on(device, target), reduction=reduction,
                                         label_smoothing=smoothing)
    expected = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits.astype(np.float64)),
        torch.from_numpy(target.astype(np.int64 if target.dtype.kind == "i" else np.float64)),
        reduction=reduction, label_smoothing=smoothing).numpy()
    scale = np.abs(logits.astype(np.float64)).sum() + 1
    assert_matches(got, expected, 1e-5, scale, "cross_entropy")


# ---- gradients (against torch, on moderate values) ----
def _normal(draw, shape):
    return draw(values(shape, -1, 0)) * 3


@st.composite
def grad_cases(draw):
    """(fn that works on webgrad and torch tensors alike, inputs) for ops whose backward has a shape rule:
    broadcasting, reductions, slicing, cat/stack, softmax, cross_entropy, matmul."""
    family = draw(st.sampled_from(["binary", "reduce", "getitem", "gather", "cat", "softmax", "cross_entropy",
                                   "matmul"]))
    if family == "binary":
        shape_a, shape_b = draw(broadcast_pair())
        op = draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "pow"]))
        a, b = _normal(draw, shape_a), _normal(draw, shape_b)
        if op == "div":
            b = np.where(np.abs(b) < 0.3, 1.0, b).astype(np.float32)
        if op == "pow":
            a = np.abs(a) + np.float32(0.5)
        fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
              "div": lambda x, y: x / y, "maximum": lambda x, y: x.maximum(y), "pow": lambda x, y: x ** y}[op]
        return fn, (a, b)
    if family == "reduce":
        shape = draw(shapes(max_numel=500))
        op = draw(st.sampled_from(["sum", "mean", "amax", "amin", "max", "min"]))
        dim = dims_for(draw, len(shape), allow_none=False)
        if op in ("max", "min"):
            dim = _axes(dim, len(shape))[0] if shape else 0
        keepdim = draw(st.booleans())
        if op in ("amax", "amin", "max", "min") and any(shape[d] == 0 for d in _axes(dim, len(shape))):
            op = "sum"
        if op in ("max", "min"):   # (values, indices): the gradient flows to the index it returns
            return (lambda x: getattr(x, op)(dim, keepdim=keepdim)[0]), (_normal(draw, shape),)
        return (lambda x: getattr(x, op)(dim, keepdim=keepdim)), (_normal(draw, shape),)
    if family == "getitem":
        x, perm, index = draw(index_cases())
        return (lambda t: t.permute(perm)[index]), (x,)
    if family == "gather":
        x, dim, index, select = draw(gather_cases())
        return (lambda t, i: t.index_select(dim, i) if select else t.gather(dim, i)), (x, index)
    if family == "cat":
        arrays, dim, stack = draw(cat_cases())
        arrays = [a.astype(np.float32) / np.float32(max(1.0, float(np.abs(a).max(initial=0)))) for a in arrays]
        name = "stack" if stack else "cat"
        return (lambda *ts: getattr(torch if isinstance(ts[0], torch.Tensor) else wg, name)(list(ts), dim)), \
            tuple(arrays)
    if family == "softmax":
        shape = draw(shapes(min_ndim=1, max_numel=500))
        dim = draw(st.integers(-len(shape), len(shape) - 1))
        log = draw(st.booleans())
        return (lambda x: x.log_softmax(dim) if log else x.softmax(dim)), (_normal(draw, shape),)
    if family == "cross_entropy":
        logits, target, reduction, smoothing = draw(cross_entropy_cases())
        logits = _normal(draw, logits.shape)

        def fn(x, y):
            lib = torch.nn.functional if isinstance(x, torch.Tensor) else wg.nn.functional
            return lib.cross_entropy(x, y, reduction=reduction, label_smoothing=smoothing)
        return fn, (logits, target)
    a, b = draw(matmul_cases())
    return (lambda x, y: x @ y), (_normal(draw, a.shape), _normal(draw, b.shape))


@fuzz(grad_cases())
def test_gradients(device, case):
    fn, inputs = case
    grad = tuple(i for i, a in enumerate(inputs) if a.dtype.kind == "f")
    check_op(fn, *inputs, device=device, grad=grad, fd=False, atol=2e-4, rtol=2e-4)


# ---- regressions the fuzzer found, as fixed cases ----
def test_list_index_empty_and_out_of_range(device):
    """x[[]] selects nothing (it was read as a float index); a list position past the end is an
    IndexError on webgpu too (its gather kernel once silently read 0)."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert_matches(on(device, x)[[]], x[[]].astype(np.float64), 0, what="x[[]]")
    for bad in ([3], [0, -4], [[1], [5]]):
        with pytest.raises(IndexError, match="out of bounds"):
            on(device, x)[bad]
        with pytest.raises(IndexError):
            torch.tensor(x)[torch.tensor(bad)]


@pytest.mark.parametrize("log", [False, True])
def test_softmax_of_empty_and_0d(log, device):
    """Softmax over an empty dim is empty (amax of nothing used to raise); a 0-d softmax is 1."""
    for shape, dim in (((3, 0), 1), ((0, 4), 0), ((0, 4), 1), ((), 0)):
        x = np.random.default_rng(seed()).standard_normal(shape).astype(np.float32) * 100
        got = on(device, x).log_softmax(dim) if log else on(device, x).softmax(dim)
        expected = (torch.log_softmax if log else torch.softmax)(torch.tensor(x, dtype=torch.float64), dim)
        assert_matches(got, expected.numpy(), 1e-6, what=f"softmax{shape} dim {dim}")


def test_tanh_and_log_keep_relative_precision_near_zero(device):
    """WGSL's builtins gave tanh(1e-30) = 3e-8 and log(0.992) 3e-6 off on lavapipe (the spec allows
    absolute errors there): both keep a few ulp of their result everywhere."""
    x = np.float32([1e-30, 1e-8, 2.2e-3, 0.3, 0.62, 0.63, 0.7, 5, 9, 20, 1e30])
    x = np.concatenate([x, -x])
    assert_matches(on(device, x).tanh(), np.tanh(x.astype(np.float64)), 3e-7, what="tanh")
    x = np.float32([0.5, 0.69, 0.71, 0.9, 0.992175, 1 - 2**-24, 1, 1 + 2**-23, 1.0001, 1.39, 1.41, 2, 1e-30, 1e30])
    assert_matches(on(device, x).log(), np.log(x.astype(np.float64)), 5e-7, what="log")


def test_max_with_dim_gradient_goes_to_the_returned_index(device):
    """As in torch: with ties, max(dim)'s values pass the gradient to their index only (it was split)."""
    x = np.float32([[2, 5, 5, 1], [3, 3, 3, 3]])
    for op in ("max", "min"):
        check_op(lambda t: getattr(t, op)(1)[0], x, device=device, fd=False)


def test_python_int_operand_wraps_to_int32(device):
    """An int beyond int32 wraps as in torch (the cpu device raised OverflowError, webgpu wrapped)."""
    x = np.int32([2, -3, 2**31 - 1])
    for scalar in (2**40 + 5, -2**31 - 1, 2**32):
        expected = (torch.tensor(x) + scalar).numpy()
        assert_matches(on(device, x) + scalar, expected, what=f"+ {scalar}")


def test_empty_dim_list_reduces_every_dim(device):
    x = np.random.default_rng(seed()).standard_normal((2, 3)).astype(np.float32)
    for op, scale in (("sum", np.abs(x).sum()), ("mean", np.abs(x).mean()), ("amax", None)):
        expected = getattr(torch.tensor(x, dtype=torch.float64), op)(())
        # a float32 sum's rounding is relative to sum |x|, not to the (maybe cancelled) result
        assert_matches(getattr(on(device, x), op)(()), expected.numpy(), 1e-6, scale, what=f"{op}(())")


def test_cat_of_0d_tensors_raises(device):
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        wg.cat([on(device, np.float32(1)), on(device, np.float32(2))])


def test_argmax_over_all_of_a_strided_uint8_view(device):
    """argmax() flattened its input first, a copy webgpu cannot write for uint8."""
    x = np.random.default_rng(seed()).integers(0, 256, (4, 6), dtype=np.uint8)
    assert_matches(on(device, x).T.argmax(), np.asarray(x.T.argmax(), np.int32), what="argmax of x.T")
