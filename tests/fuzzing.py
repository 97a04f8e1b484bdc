"""What the property-based tests (tests/test_fuzz*.py) share: `fuzz`, which runs a property on
hypothesis' cases on both devices; the strategies that draw shapes (empty and size-1 dims included),
broadcast pairs, reduction dims and values from 1e-30 to 1e30, maybe as strided views; and the
comparison with a float64 NumPy oracle.

Hypothesis is seeded from conftest's per-test seed, so `WEBGRAD_TEST_SEED=<seed> pytest -k <id>`
(with the same WEBGRAD_FUZZ_EXAMPLES) replays a failure. WEBGRAD_FUZZ_EXAMPLES=N sets the examples per
property (default 25: the fast slice in `make test`); bench/fuzz.py runs thousands and counts them
in CASES.
"""
import collections
import math
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings, strategies as st

import webgrad as wg
from conftest import seed, tag

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
    """Shapes with size-0 and size-1 dims, and now and then a side past a workgroup (65, 257). The
    bound counts a 0 side as 1, so a case that resizes one dim (cat) stays small."""
    shape = [max(s, min_side) for s in draw(st.lists(SIDES, min_size=min_ndim, max_size=max_ndim))]
    while math.prod(max(s, 1) for s in shape) > max_numel:
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


# ---- cases that more than one property draws ----
def reduced_dims(dim, ndim):
    """The sorted, wrapped dims a reduction's dim argument names (a 0-d tensor has none)."""
    if not ndim:
        return ()
    if dim is None or dim == () or dim == []:
        return tuple(range(ndim))
    return tuple(sorted({d % ndim for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}))


@st.composite
def matmul_cases(draw):
    """(*batch, m, k) @ (*batch', k, n) with broadcast batches, 1-D operands and empty sizes; factors up to
    1e15 so that products stay in float32's range."""
    m, k, n = (draw(st.one_of(st.integers(0, 4), st.sampled_from([1, 17, 33]))) for _ in range(3))
    batch_a, batch_b = draw(broadcast_pair(max_ndim=2, max_numel=8))
    shape_a = (k,) if draw(st.integers(0, 5)) == 0 else batch_a + (m, k)
    shape_b = (k,) if draw(st.integers(0, 5)) == 0 else batch_b + (k, n)
    return draw(values(shape_a, -15, 15)), draw(values(shape_b, -15, 15))


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
