"""torch's named products (mm, bmm, mv, dot, outer, addmm, baddbmm, tensordot, trace) and
arrangement helpers (eye, diag, diagonal, the stacks, broadcast_to, meshgrid, rot90, diff,
take_along_dim, repeat_interleave, index_add, index_fill) on both devices against torch."""
import functools

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, randn, rng, tag, wg_tensor
from torch_api import raises_like, same_error


def both(fn, *inputs, **kwargs):
    return check_op(functools.partial(fn, wg), *inputs, torch_fn=functools.partial(fn, torch), **kwargs)


# ---- products ----
def test_products(device):
    a, b, v, w = randn(3, 4), randn(4, 5), randn(4), randn(3)
    both(lambda m, x, y: m.mm(x, y) + x.mm(y), a, b, device=device)
    both(lambda m, x, y: m.bmm(x, y) + x.bmm(y), randn(2, 3, 4), randn(2, 4, 5), device=device)
    both(lambda m, x, y: m.mv(x, y) + x.mv(y), a, v, device=device)
    both(lambda m, x, y: m.dot(x, y) + x.dot(y) + m.inner(x, y), v, randn(4), device=device)
    both(lambda m, x, y: m.inner(x, y) + x.inner(y), randn(2, 3, 4), a, device=device)
    both(lambda m, x, y: m.inner(x, y), np.float32(1.5), a, device=device)
    both(lambda m, x, y: m.outer(x, y) + x.outer(y) + m.ger(x, y), w, v, device=device)
    both(lambda m, x, y: m.tensordot(x, y, dims=([1, 0], [0, 2])), randn(3, 4, 2), randn(4, 5, 3), device=device)
    both(lambda m, x, y: m.tensordot(x, y, 1) + m.tensordot(x, y, dims=([1], [0])), a, b, device=device)
    both(lambda m, x: m.trace(x) + x.trace(), randn(4, 6), device=device)
    both(lambda m, x, y: m.dot(x, y), integers(5, low=-4, high=4), integers(5, low=-4, high=4), device=device)
    both(lambda m, x, y: [m.mm(x, y), m.outer(x[:, 0], y[0])], randn(0, 3), randn(3, 2), device=device)


@pytest.mark.parametrize("scales", [{}, {"beta": 0.5, "alpha": -2.0}, {"beta": 0}])
def test_addmm_and_baddbmm(scales, device):
    a, b = randn(3, 4), randn(4, 5)
    grad = (1, 2) if scales.get("beta") == 0 else True   # (at beta 0 the input's gradient is none here, zeros in torch)
    for bias in (randn(5), randn(3, 5), randn(3, 1)):
        both(lambda m, c, x, y: m.addmm(c, x, y, **scales) + c.addmm(x, y, **scales), bias, a, b, device=device,
             grad=grad)
    both(lambda m, c, x, y: m.baddbmm(c, x, y, **scales) + c.baddbmm(x, y, **scales),
         randn(1, 3, 5), randn(2, 3, 4), randn(2, 4, 5), device=device, grad=grad)


def test_addmm_beta_zero_ignores_nan(device):
    nan = wg.full((3, 5), float("nan"), device=device)
    out = wg.addmm(nan, wg.ones(3, 4, device=device), wg.ones(4, 5, device=device), beta=0)
    assert out.tolist() == [[4.0] * 5] * 3, tag(f"{out.tolist()}")


PRODUCT_ERRORS = {
    "mm_vector": lambda m: m.mm(m.ones(2), m.ones(2, 2)),
    "mm_sizes": lambda m: m.mm(m.ones(2, 3), m.ones(2, 2)),
    "bmm_rank": lambda m: m.bmm(m.ones(2, 2), m.ones(2, 2, 2)),
    "bmm_sizes": lambda m: m.bmm(m.ones(2, 2, 3), m.ones(3, 3, 2)),
    "mv_sizes": lambda m: m.mv(m.ones(2, 3), m.ones(2)),
    "dot_rank": lambda m: m.dot(m.ones(2, 1), m.ones(2)),
    "dot_sizes": lambda m: m.dot(m.ones(2), m.ones(3)),
    "outer_rank": lambda m: m.outer(m.ones(2, 1), m.ones(2)),
    "trace_rank": lambda m: m.trace(m.ones(2, 2, 2)),
    "inner_sizes": lambda m: m.inner(m.ones(2, 3), m.ones(2)),
}


@pytest.mark.parametrize("name", list(PRODUCT_ERRORS))
def test_product_errors_match_torch(name):
    same_error(lambda: PRODUCT_ERRORS[name](wg), lambda: PRODUCT_ERRORS[name](torch))


# ---- eye, diagonals ----
def test_eye(device):
    for args in ((4,), (3, 5), (0,), (2, 0)):
        ours = wg.eye(*args, device=device)
        assert ours.device == device and ours.dtype is wg.float32, tag(f"{ours.dtype}")
        assert_close(ours, torch.eye(*args), what=f"eye{args}")
    assert_close(wg.eye(3, dtype=wg.int32, device=device), torch.eye(3, dtype=torch.int64), what="int eye")
    assert wg.eye(3, dtype=wg.bool, device=device).dtype is wg.bool
    raises_like(lambda: wg.eye(-1), lambda: torch.eye(-1))
    sizes = [tuple(int(v) for v in rng().integers(-8, 9, 3)) for _ in range(6)]
    for args in ((4, 3), (3, 5, 1), (4, 4, -2), (0, 3), (3, 3, 9), *((abs(r), abs(c), o) for r, c, o in sizes)):
        for name in ("tril_indices", "triu_indices"):
            ours = getattr(wg, name)(*args, device=device)
            assert ours.device == device, tag(name)
            assert_close(ours, getattr(torch, name)(*args), what=f"{name}{args}")
    raises_like(lambda: wg.tril_indices(-1, 3), lambda: torch.tril_indices(-1, 3))
    raises_like(lambda: wg.triu_indices(3, -2), lambda: torch.triu_indices(3, -2))


@pytest.mark.parametrize("offset", [0, 2, -1, 7])
def test_diagonal_and_diag(offset, device):
    both(lambda m, x: m.diagonal(x, offset) * 2 + x.diagonal(offset), randn(4, 5), device=device)
    both(lambda m, x: m.diagonal(x, offset, -1, 0) + x.diagonal(offset=offset, dim1=2, dim2=0), randn(5, 3, 4),
         device=device)
    both(lambda m, x: m.diag(x, offset) + x.diag(offset), randn(4, 5), device=device)
    both(lambda m, x: m.diag(x, offset) + x.diag(offset), randn(4), device=device)
    both(lambda m, x: m.diag(x, offset), integers(3, low=-5, high=5), device=device)


def test_diagonal_is_a_view(device):
    x = wg.zeros(3, 3, device=device)
    x.diagonal().fill_(1.0)
    assert x.tolist() == wg.eye(3).tolist(), tag(f"{x.tolist()}")
    raises_like(lambda: wg.diagonal(wg.ones(3)), lambda: torch.diagonal(torch.ones(3)))
    raises_like(lambda: wg.diagonal(wg.ones(3, 3), 0, 1, 1), lambda: torch.diagonal(torch.ones(3, 3), 0, 1, 1))
    raises_like(lambda: wg.diag(wg.ones(2, 2, 2)), lambda: torch.diag(torch.ones(2, 2, 2)))


# ---- stacks ----
SHAPE_SETS = {"vectors": [(3,), (3,)], "matrices": [(2, 3), (2, 3)], "scalars": [(), ()], "3d": [(2, 3, 2), (2, 3, 2)]}


@pytest.mark.parametrize("shapes", list(SHAPE_SETS))
def test_stacks(shapes, device):
    a, b = (randn(*s) for s in SHAPE_SETS[shapes])
    for name in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        if name == "column_stack" and shapes == "3d":
            continue
        both(lambda m, x, y: getattr(m, name)([x, y * 2]), a, b, device=device)
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        both(lambda m, x, y: getattr(m, name)(x, y), a, b, device=device)
        both(lambda m, x: getattr(m, name)(x), a, device=device)


def test_stacks_of_different_widths(device):
    both(lambda m, x, y: m.hstack((x, y)), randn(2, 3), randn(2, 1), device=device)
    both(lambda m, x, y: m.vstack((x, y)), randn(3), randn(2, 3), device=device)
    both(lambda m, x, y: m.column_stack((x, y)), randn(4), randn(4, 2), device=device)


def test_broadcast_to_and_meshgrid(device):
    both(lambda m, x: m.broadcast_to(x, (2, 3, 4)) + x.broadcast_to((3, 4)), randn(3, 1), device=device)
    a, b, c = randn(3), randn(4), randn(2)
    for indexing in ("ij", "xy"):
        both(lambda m, x, y, z: m.meshgrid(x, y, z, indexing=indexing), a, b, c, device=device)
        both(lambda m, x, y: m.meshgrid([x, y], indexing=indexing), a, b, device=device)
    same_error(lambda: wg.meshgrid(wg.ones(2), indexing="yx"), lambda: torch.meshgrid(torch.ones(2), indexing="yx"))


@pytest.mark.parametrize("k", [1, 2, 3, -1, 4])
def test_rot90(k, device):
    both(lambda m, x: m.rot90(x, k) + 0, randn(3, 4), device=device)
    both(lambda m, x: x.rot90(k, [2, 0]) + 0, randn(2, 3, 4), device=device)


def test_rot90_errors():
    for args in (dict(dims=[0]), dict(dims=[1, 1])):
        same_error(lambda: wg.rot90(wg.ones(2, 2), **args), lambda: torch.rot90(torch.ones(2, 2), **args))
    same_error(lambda: wg.rot90(wg.ones(2)), lambda: torch.rot90(torch.ones(2)))


def test_diff(device):
    x = randn(4, 6)
    both(lambda m, t: m.diff(t) + 0, x, device=device)
    both(lambda m, t: t.diff(n=2, dim=0), x, device=device)
    both(lambda m, t, p, a: m.diff(t, dim=1, prepend=p, append=a), x, randn(4, 2), randn(4, 1), device=device)
    both(lambda m, t: m.diff(t, n=3), integers(7, low=-9, high=9), device=device)
    both(lambda m, t: m.diff(t), rng().random(8) > 0.5, device=device)
    both(lambda m, t: m.diff(t, n=9), x, device=device)
    same_error(lambda: wg.diff(wg.ones(2, 3), prepend=wg.tensor(0.0)),
               lambda: torch.diff(torch.ones(2, 3), prepend=torch.tensor(0.0)))


def test_take_along_dim(device):
    x = randn(4, 5)
    idx = np.argsort(x, axis=1).astype(np.int32)
    both(lambda m, t, i: m.take_along_dim(t, i, dim=1) + t.take_along_dim(i, 1), x, idx, device=device)
    both(lambda m, t, i: m.take_along_dim(t, i), x, integers(3, low=0, high=20), device=device)
    both(lambda m, t, i: m.take_along_dim(t, i, dim=0), x, integers(2, 1, low=0, high=4), device=device)


def test_repeat_interleave(device):
    x = randn(3, 2)
    both(lambda m, t: m.repeat_interleave(t, 2), x, device=device)
    both(lambda m, t: t.repeat_interleave(3, dim=1), x, device=device)
    both(lambda m, t, r: m.repeat_interleave(t, r, dim=0), x, integers(3, low=0, high=4), device=device)
    both(lambda m, r: m.repeat_interleave(r), integers(4, low=0, high=4), device=device)
    raises_like(lambda: wg.repeat_interleave(wg.ones(2), -1), lambda: torch.repeat_interleave(torch.ones(2), -1))


def test_index_add_and_index_fill(device):
    x, src = randn(5, 3), randn(4, 3)
    idx = integers(4, low=0, high=5)   # repeats add up
    both(lambda m, t, i, s: m.index_add(t, 0, i, s, alpha=2) + t.index_add(0, i, s), x, idx, src, device=device)
    both(lambda m, t, i, s: t.index_add(1, i, s), randn(3, 5), idx, randn(3, 4), device=device)
    both(lambda m, t, i: m.index_fill(t, 1, i, -1.5) + t.index_fill(0, i[:1], 2.0), x, integers(2, low=0, high=3),
         device=device)
    for fn in (lambda m, t, i: t.index_add_(0, i, t[:2] * 0 + 1), lambda m, t, i: t.index_fill_(1, i, 7)):
        ours, theirs = wg_tensor(x, device), torch.from_numpy(x.copy())
        i = integers(2, low=0, high=3)
        assert fn(wg, ours, wg_tensor(i, device)) is ours, tag("in place returned a new tensor")
        fn(torch, theirs, torch.from_numpy(i.astype(np.int64)))
        assert_close(ours, theirs, what="in place")
    ints = integers(4, 3, low=-5, high=5)
    both(lambda m, t, i: t.index_fill(0, i, 9), ints, integers(2, low=0, high=4), device=device)
    for fn in (lambda m: m.ones(3, 2).index_add(0, m.tensor([0, 1]), m.ones(3, 2)),
               lambda m: m.ones(3, 2).index_add(0, m.tensor([[0]]), m.ones(1, 2)),
               lambda m: m.ones(3, 2).index_add(0, m.tensor([0.0]), m.ones(1, 2)),
               lambda m: m.ones(3, 2).index_fill(0, m.tensor([[0]]), 1.0),
               lambda m: m.ones(3, 2).index_fill(0, m.tensor([0.0]), 1.0)):
        raises_like(lambda: fn(wg), lambda: fn(torch))
