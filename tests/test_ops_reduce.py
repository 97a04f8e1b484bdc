"""Reductions over any dims (None, int, negative, tuples), with keepdim, on both devices."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import (assert_close, check_op, distinct, integers, randn, random_shape, rng, tag,
                      wg_tensor)

SHAPES_AND_DIMS = [
    ((3, 5, 7), None), ((3, 5, 7), 0), ((3, 5, 7), 1), ((3, 5, 7), -1), ((3, 5, 7), (0, 2)),
    ((3, 5, 7), (-1, -3)), ((3, 5, 7), (0, 1, 2)), ((1000,), 0), ((1000,), None), ((257,), -1),
    ((2, 1, 4), 1), ((2, 1, 4), (1, 2)), ((4, 300), 1), ((300, 4), 0), ((), None), ("random", "random"),
]


def _resolve(shape, dim):
    if shape == "random":
        shape = random_shape()
        if rng().random() < 0.3:
            dim = None
        else:
            k = int(rng().integers(1, len(shape) + 1))
            dims = [int(d) - (len(shape) if rng().random() < 0.5 else 0)
                    for d in rng().choice(len(shape), k, replace=False)]
            dim = dims[0] if k == 1 and rng().random() < 0.5 else tuple(dims)
    return shape, dim


def _kw(dim, keepdim):
    kw = {} if dim is None else {"dim": dim}
    if keepdim:
        kw["keepdim"] = True
    return kw


def _torch_kw(dim, keepdim, ndim):
    """torch wants an explicit dim with keepdim (dim=None is webgrad's and numpy's 'all dims')."""
    return _kw(tuple(range(ndim)) if dim is None and keepdim else dim, keepdim)


def _np_axis(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", SHAPES_AND_DIMS)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_reduce(op, shape, dim, keepdim, device):
    shape, dim = _resolve(shape, dim)
    kw = _kw(dim, keepdim)
    x = distinct(*shape) if op in ("amax", "amin") else randn(*shape)
    np_fn = {"sum": np.sum, "mean": np.mean, "amax": np.amax, "amin": np.amin}[op]
    if op in ("amax", "amin") and dim is None:
        kw.pop("dim", None)
    tkw = _torch_kw(dim, keepdim, len(shape))
    check_op(lambda t: getattr(t, op)(**kw), x, device=device, torch_fn=lambda t: getattr(t, op)(**tkw),
             np_fn=lambda a: np_fn(a, axis=_np_axis(dim), keepdims=keepdim))


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 5, 7), None), ((3, 5, 7), 1), ((3, 5, 7), (0, -1)), ((1000,), 0),
                                       ((257, 3), 0), ("random", "random")])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std(op, shape, dim, keepdim, correction, device):
    shape, dim = _resolve(shape, dim)
    axis = _np_axis(dim)
    count = np.prod([shape[d] for d in (range(len(shape)) if dim is None else np.atleast_1d(dim))])
    if count - correction <= 0:
        correction = 0
    if op == "std" and count == 1:   # std of one value is 0: sqrt's gradient at 0 is not defined
        shape, dim = (3, 5, 7), 1
        axis = dim
    x = randn(*shape) + 2.0
    kw = _kw(dim, keepdim)
    np_fn = np.var if op == "var" else np.std
    tkw = _torch_kw(dim, keepdim, len(shape))
    check_op(lambda t: getattr(t, op)(correction=correction, **kw), x, device=device,
             torch_fn=lambda t: getattr(t, op)(correction=correction, **tkw),
             np_fn=lambda a: np_fn(a.astype(np.float64), axis=axis, keepdims=keepdim, ddof=correction))


def test_var_unbiased_flag(device):
    x = randn(4, 9)
    check_op(lambda t: t.var(1, unbiased=False), x, device=device, np_fn=lambda a: a.var(1))
    check_op(lambda t: t.var(0, unbiased=True), x, device=device, np_fn=lambda a: a.var(0, ddof=1))


def test_functional_forms(device):
    x = distinct(4, 6, 5)
    check_op(lambda t: wg.sum(t, 1) + wg.mean(t, (1,)) + wg.amax(t, 1) + wg.amin(t, -2) + wg.var(t, 1),
             x, device=device,
             torch_fn=lambda t: torch.sum(t, 1) + torch.mean(t, (1,)) + torch.amax(t, 1) + torch.amin(t, -2)
             + torch.var(t, 1))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 5, 7), 0), ((3, 5, 7), 1), ((3, 5, 7), -1), ((1000,), 0), ((257,), -1),
                                       ((2, 1, 4), 1), ((6, 300), 1), ("random", "random")])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_dim_returns_values_and_indices(op, shape, dim, keepdim, device):
    shape, dim = _resolve(shape, dim)
    if isinstance(dim, tuple) or dim is None:
        dim = int(rng().integers(-len(shape), len(shape)))
    out = check_op(lambda t: getattr(t, op)(dim, keepdim), distinct(*shape), device=device)
    assert out[1].dtype == np.int32, tag(f"indices have dtype {out[1].dtype}")
    t = wg_tensor(distinct(*shape), device)
    result = getattr(t, op)(dim=dim, keepdim=keepdim)
    assert result.values.shape == result.indices.shape == result[0].shape
    values, indices = result
    assert indices.dtype is wg.int32


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_over_everything(op, device):
    for shape in [(257,), (3, 5, 7), ()]:
        check_op(lambda t: getattr(t, op)(), distinct(*shape), device=device, np_fn=getattr(np, op))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 5, 7), None), ((3, 5, 7), 0), ((3, 5, 7), 1), ((3, 5, 7), -1),
                                       ((1000,), 0), ((1000,), None), ((2, 1, 4), 1), ((5, 300), 1),
                                       ("random", "random")])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op, shape, dim, keepdim, device):
    shape, dim = _resolve(shape, dim)
    if isinstance(dim, tuple):
        dim = dim[0]
    kw = _kw(dim, keepdim)
    out = check_op(lambda t: getattr(t, op)(**kw), distinct(*shape), device=device, grad=False)[0]
    assert out.dtype == np.int32
    # ties: the first occurrence wins, as in torch and NumPy
    ties = rng().integers(0, 3, shape).astype(np.float32)
    check_op(lambda t: getattr(t, op)(**kw), ties, device=device, grad=False,
             np_fn=None if keepdim else lambda a: getattr(np, op)(a, axis=dim))


def test_argmax_functional(device):
    x = distinct(4, 9)
    check_op(lambda t: wg.argmax(t, 1), x, device=device, torch_fn=lambda t: torch.argmax(t, 1), grad=False)
    check_op(lambda t: wg.argmin(t), x, device=device, torch_fn=lambda t: torch.argmin(t), grad=False)


def test_amax_gradient_is_shared_between_ties(device):
    x = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5], [-1.0, -4.0, -1.0, -9.0]], np.float32)
    check_op(lambda t: t.amax(1), x, device=device, fd=False)
    check_op(lambda t: t.amin(1), x, device=device, fd=False)
    check_op(lambda t: t.amax(), x, device=device, fd=False)
    check_op(lambda t: t.max(), x, device=device, fd=False)


def test_reductions_of_views(device):
    x = randn(6, 8, 5)
    check_op(lambda t: t.permute(2, 0, 1).sum((0, 2)), x, device=device)
    check_op(lambda t: t[::2, 1:, ::3].mean(-1), x, device=device)
    check_op(lambda t: t.mT.amax(1), distinct(6, 8, 5), device=device)
    check_op(lambda t: t[:, None].expand(6, 3, 8, 5).sum(1), x, device=device)


def test_integer_and_bool_reductions(device):
    x = integers(5, 7, low=-20, high=20)
    for fn in (lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.amax(0), lambda t: t.amin(-1),
               lambda t: t.argmax(1), lambda t: t.max(1)):
        check_op(fn, x, device=device, grad=False)
    out = check_op(lambda t: t.sum(0), x, device=device, grad=False)[0]
    assert out.dtype == np.int32
    mask = np.asarray(rng().random((6, 9)) < 0.5)
    check_op(lambda m: m.sum(1), mask, device=device, grad=False)
    check_op(lambda t: t.float().mean(1), x, device=device, grad=False)
    assert_close(wg_tensor(x, device).mean(dtype=wg.float32), np.mean(x), what="mean of int32 as float32")


def test_large_reduction(device):
    x = randn(50_000)
    check_op(lambda t: t.sum(), x, device=device, atol=2e-3, fd=False)
    check_op(lambda t: t.amax(), distinct(3, 10_000), device=device, fd=False)


def test_sum_of_empty_is_zero_and_max_of_empty_raises(device):
    x = wg.zeros(0, 3, device=device)
    assert_close(x.sum(0), np.zeros(3, np.float32))
    assert x.sum().item() == 0.0
    with pytest.raises(RuntimeError):
        x.amax(0)


def test_bad_dims_raise(device):
    x = wg_tensor(randn(3, 4), device)
    for fn in (lambda: x.sum(2), lambda: x.mean(-3), lambda: x.amax((0, 5)), lambda: x.argmax(3),
               lambda: x.max(2), lambda: x.var(7)):
        with pytest.raises(IndexError):
            fn()
    with pytest.raises(RuntimeError):
        x.sum((0, 0))
    with pytest.raises(RuntimeError):
        x.sum((1, -1))


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "argmax", "argmin"])
def test_reduce_0d_over_dim_0(op, device):
    x = randn()
    for dim in (0, -1):
        for keepdim in (False, True):
            check_op(lambda t: getattr(t, op)(dim, keepdim=keepdim), x, device=device,
                     grad=not op.startswith("arg"))
    with pytest.raises(IndexError):
        getattr(wg_tensor(x, device), op)(1)


def test_reduce_with_more_outputs_than_one_grid_dimension(monkeypatch):
    # a GPU's form, one workgroup per output: 70000 > 65535 workgroups spill into the grid's y dimension
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)
    x = randn(70_000, 3)
    check_op(lambda t: t.sum(1), x, device="webgpu", grad=False)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "argmax", "argmin"])
def test_reductions_down_columns(op, monkeypatch):
    # adjacent outputs side by side, each a row apart (a Linear's bias gradient): a thread per
    # (output, chunk of rows), then the chunks' results reduced (from fewer elements than on a GPU)
    from webgrad.backends.webgpu.kernels import reduce
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)   # a GPU's form
    monkeypatch.setattr(reduce, "COLUMN_FROM", 1 << 14)
    cols, rows = int(rng().integers(64, 100)), 2 * int(rng().integers(256, 400))   # cols * rows / 2 >= 2**14
    x = randn(rows, cols) if op in ("sum", "mean") else distinct(rows, cols)
    every_other = wg_tensor(x, "webgpu")[::2]._view   # rows two rows apart: still a column reduction
    assert reduce._down_columns(every_other, (1,), (0,), cols, rows // 2)
    check_op(lambda t: getattr(t, op)(0), x, device="webgpu", grad=False)
    check_op(lambda t: getattr(t[::2], op)(0), x, device="webgpu", grad=False)
    if op.startswith("arg"):   # ties: the first row wins across the chunks too
        ties = rng().integers(0, 3, (rows, cols)).astype(np.float32)
        check_op(lambda t: getattr(t, op)(0), ties, device="webgpu", grad=False)
    else:   # over two dims
        check_op(lambda t: getattr(t, op)((0, 1)), x.reshape(2, rows // 2, cols), device="webgpu", grad=False)


@pytest.mark.parametrize("software", [True, False])
@pytest.mark.parametrize("op", ["sum", "amax"])
def test_reductions_over_batch_and_plane_both_forms(op, software, monkeypatch):
    """A convolution's bias gradient: (N, C, H, W) reduced over N, H and W, here of a transposed view.
    A software adapter's passes step through x in runs (a plane's rows one run where contiguous;
    chunks of 1024 elements: the second starts mid-run), a GPU's work positions out; both as torch's."""
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", software)
    n, c, h, w = 5, int(rng().integers(2, 5)), 13, 17   # n * h * w = 1105 elements an output
    x = randn(n, c, w, h) if op == "sum" else distinct(n, c, w, h)
    check_op(lambda t: getattr(t.transpose(2, 3), op)((0, 2, 3)), x, device="webgpu", grad=False, atol=1e-4)
    check_op(lambda t: getattr(t, op)((0, 2, 3)), x, device="webgpu", grad=False, atol=1e-4)   # H, W one run
    check_op(lambda t: getattr(t, op)((0, 2)), x, device="webgpu", grad=False)


@pytest.mark.parametrize("software", [True, False])
def test_argmax_in_chunks_both_forms(software, monkeypatch):
    """An arg op over more than a chunk: the chunks' picks, then those compared again (each position
    read from x anew); ties go to the first index across chunks, as torch's."""
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", software)
    ties = rng().integers(0, 4, (3, 2 * 1500)).astype(np.float32)
    for op in ("argmax", "argmin"):
        check_op(lambda t: getattr(t[:, ::2], op)(1), ties, device="webgpu", grad=False)
        check_op(lambda t: getattr(t.T[::2], op)(0), ties, device="webgpu", grad=False)
