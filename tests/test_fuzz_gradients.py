"""Property-based tests of softmax and cross_entropy against a float64 NumPy oracle, and of the
gradients of a set of ops against torch (conftest.check_op, on moderate values), on hypothesis'
cases (tests/fuzzing.py)."""

import numpy as np
import torch
from hypothesis import strategies as st

import webgrad as wg
from conftest import check_op
from fuzzing import (assert_matches, broadcast_pair, cat_cases, dims_for, fuzz, gather_cases, index_cases, matmul_cases,
                     on, reduced_dims, shapes, values)


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
            dim = reduced_dims(dim, len(shape))[0] if shape else 0
        keepdim = draw(st.booleans())
        if op in ("amax", "amin", "max", "min") and any(shape[d] == 0 for d in reduced_dims(dim, len(shape))):
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
