"""torch's value-sized ops (nonzero, argwhere, unique, bincount, equal), order statistics (median,
kthvalue) and the reductions beside sum/mean (aminmax, var_mean, std_mean, nansum, nanmean,
count_nonzero, cumprod) on both devices against torch."""
import functools

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import check_op, distinct, integers, randn, rng, tag, wg_tensor
from torch_api import raises_like, same_error


def both(fn, *inputs, **kwargs):
    return check_op(functools.partial(fn, wg), *inputs, torch_fn=functools.partial(fn, torch), **kwargs)


def _sparse(*shape):
    """Random values with about half of them zero."""
    return np.where(rng().random(shape) < 0.5, 0, randn(*shape)).astype(np.float32)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (), (0, 3)])
def test_nonzero_and_argwhere(shape, device):
    x = _sparse(*shape)
    both(lambda m, t: m.nonzero(t), x, device=device)
    both(lambda m, t: t.nonzero(as_tuple=True), x, device=device)
    both(lambda m, t: m.argwhere(t) + t.argwhere(), x, device=device)
    both(lambda m, t: [m.count_nonzero(t), t.count_nonzero(dim=-1 if t.ndim else None)], x, device=device)
    both(lambda m, t: m.nonzero(t > 0), x, device=device)


@pytest.mark.parametrize("dtype", ["int", "float"])
def test_unique(dtype, device):
    x = integers(4, 6, low=-3, high=5) if dtype == "int" else rng().choice([-1.5, 0.0, 2.25, 7.0], (4, 6)).astype(
        np.float32)
    both(lambda m, t: m.unique(t), x, device=device, grad=False)
    both(lambda m, t: t.unique(return_inverse=True, return_counts=True), x, device=device, grad=False)
    both(lambda m, t: m.unique(t, sorted=True, return_counts=True), x, device=device, grad=False)
    both(lambda m, t: m.unique(t, return_inverse=True), x, device=device, grad=False)
    for dim in (0, 1, -1):
        rows = x[:, :3].copy()
        rows[2] = rows[0]   # a repeated row
        both(lambda m, t: m.unique(t, dim=dim, return_inverse=True, return_counts=True), rows, device=device,
             grad=False)
    ours = wg.unique(wg_tensor(x, device), sorted=False)
    assert sorted(ours.tolist()) == sorted(set(x.reshape(-1).tolist())), tag("unique(sorted=False)")


def test_bincount(device):
    x = integers(30, low=0, high=8)
    both(lambda m, t: m.bincount(t) + t.bincount(), x, device=device)
    both(lambda m, t: m.bincount(t, minlength=12), x, device=device)
    w = randn(30)
    both(lambda m, t, v: m.bincount(t, weights=v) + t.bincount(v), x, w, device=device, grad=False)
    both(lambda m, t: m.bincount(t, minlength=3), np.zeros(0, np.int32), device=device)
    for bad in (lambda m: m.bincount(m.tensor([-1, 2])), lambda m: m.bincount(m.tensor([[1]])),
                lambda m: m.bincount(m.tensor([1.0]))):
        raises_like(lambda: bad(wg), lambda: bad(torch))
    same_error(lambda: wg.bincount(wg.tensor([-1, 2])), lambda: torch.bincount(torch.tensor([-1, 2])))


def test_equal(device):
    a = randn(3, 4)
    x = wg_tensor(a, device)
    assert wg.equal(x, wg_tensor(a.copy(), device)) is True and x.equal(x.clone()) is True, tag()
    b = a.copy()
    b[rng().integers(3), rng().integers(4)] += 1
    assert wg.equal(x, wg_tensor(b, device)) is False, tag("one changed value")
    assert wg.equal(x, x[:2]) is False, tag("different shapes")


@pytest.mark.parametrize("shape", [(9,), (4, 7), (3, 6, 5)])
def test_median_and_kthvalue(shape, device):
    x = distinct(*shape)
    both(lambda m, t: m.median(t) + t.median(), x, device=device)
    for dim in range(-1, len(shape)):
        both(lambda m, t: m.median(t, dim), x, device=device)
        both(lambda m, t: t.median(dim=dim, keepdim=True), x, device=device)
        k = int(rng().integers(1, shape[dim] + 1))
        both(lambda m, t: m.kthvalue(t, k, dim), x, device=device)
        both(lambda m, t: t.kthvalue(k, dim, keepdim=True), x, device=device)


def test_median_edges_and_errors(device):
    assert np.isnan(wg.median(wg.zeros(0, device=device)).item()), tag("median of nothing")
    both(lambda m, t: m.median(t, 0), np.float32(2.5), device=device)
    same_error(lambda: wg.kthvalue(wg.ones(3), 4), lambda: torch.kthvalue(torch.ones(3), 4))
    same_error(lambda: wg.median(wg.ones(0, 3), 0), lambda: torch.median(torch.ones(0, 3), 0))
    both(lambda m, t: m.median(t, 0), np.ones((3, 0), np.float32), device=device)
    both(lambda m, t: m.median(t), integers(8, low=-5, high=5), device=device)


@pytest.mark.parametrize("dim", [None, 0, (0, 2)])
def test_reductions_beside_sum(dim, device):
    x = randn(4, 3, 5)
    both(lambda m, t: m.var_mean(t, dim) if dim is not None else m.var_mean(t), x, device=device)
    both(lambda m, t: m.std_mean(t, dim, keepdim=True, correction=0), x, device=device)
    if dim is None or isinstance(dim, int):
        both(lambda m, t: m.aminmax(t, dim=dim) if dim is not None else t.aminmax(), distinct(4, 3, 5),
             device=device)
    nans = np.where(rng().random(x.shape) < 0.3, np.nan, x).astype(np.float32)
    both(lambda m, t: m.nansum(t, dim) if dim is not None else t.nansum(), nans, device=device)
    # torch as the oracle alone: a slice all NaN (often, at 30% NaN) makes a NaN mean, and its
    # gradient NaN, which finite differences cannot see
    both(lambda m, t: m.nanmean(t, dim, keepdim=True) if dim is not None else t.nanmean(), nans, device=device,
         fd=False)
    raises_like(lambda: wg.nanmean(wg.tensor([1, 2])), lambda: torch.nanmean(torch.tensor([1, 2])))


@pytest.mark.parametrize("size", [0, 1, 5, 17])
def test_cumprod(size, device):
    x = randn(3, size)
    if size:
        x[rng().integers(3), rng().integers(size)] = 0.0   # exact with a zero (no log / divide)
    both(lambda m, t: m.cumprod(t, 1) + t.cumprod(dim=0), x, device=device)
    both(lambda m, t: m.cumprod(t, -1), integers(2, size, low=-3, high=4), device=device)
    both(lambda m, t: m.cumprod(t, 0), rng().random(size) > 0.3, device=device)
    both(lambda m, t: m.cumprod(t, 0, dtype=m.float32), integers(size, low=1, high=3), device=device)
