"""Rearranging and masking ops (ops/rearrange.py), scatter/one_hot (ops/scatter.py) and einsum,
forward and backward against torch and finite differences on both devices."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import check_op, integers, randn, rng, tag, wg_tensor


# ---- flip, roll, repeat, tile ----
@pytest.mark.parametrize("dims", [(0,), (1,), (-1, 0), (0, 1, 2)])
def test_flip(dims, device):
    check_op(lambda t: t.flip(dims), randn(3, 4, 5), device=device)
    check_op(lambda t: wg.flip(t, dims), randn(2, 1, 7), device=device, torch_fn=lambda t: torch.flip(t, dims))


def test_fliplr_flipud_and_errors(device):
    check_op(lambda t: wg.fliplr(t) + wg.flipud(t), randn(4, 4), device=device,
             torch_fn=lambda t: torch.fliplr(t) + torch.flipud(t))
    check_op(lambda t: t.flip(0), integers(5), device=device)
    with pytest.raises(RuntimeError):
        wg.tensor(randn(2, 3), device=device).flip((0, 0))


@pytest.mark.parametrize("shifts,dims", [(1, None), (-3, None), (2, 0), (7, 1), ((1, -2), (0, 1)), ((0, 5), (1, 0)),
                                         (13, -1)])
def test_roll(shifts, dims, device):
    check_op(lambda t: t.roll(shifts, dims), randn(3, 5), device=device)
    check_op(lambda t: wg.roll(t, shifts, dims), integers(3, 5), device=device,
             torch_fn=lambda t: torch.roll(t, shifts, dims))
    with pytest.raises(RuntimeError):
        wg.tensor(randn(2, 3), device=device).roll((1, 2), (0,))


@pytest.mark.parametrize("sizes", [(2, 3), (1, 1), (3, 1, 2), (2, 1, 1, 3), (0, 2)])
def test_repeat(sizes, device):
    check_op(lambda t: t.repeat(*sizes), randn(2, 3), device=device)
    check_op(lambda t: t.repeat(sizes), randn(1, 4), device=device)
    with pytest.raises(RuntimeError):
        wg.tensor(randn(2, 3), device=device).repeat(2)


@pytest.mark.parametrize("dims", [(2,), (2, 3), (1, 2, 2), ()])
def test_tile(dims, device):
    check_op(lambda t: t.tile(dims), randn(2, 3), device=device)
    check_op(lambda t: wg.tile(t, dims), randn(3), device=device, torch_fn=lambda t: torch.tile(t, dims))


# ---- triangles and masks ----
@pytest.mark.parametrize("diagonal", [0, 1, -1, 3, -4])
@pytest.mark.parametrize("shape", [(4, 4), (3, 6), (2, 5, 3)])
def test_tril_triu(shape, diagonal, device):
    check_op(lambda t: t.tril(diagonal) + 2 * wg.triu(t, diagonal=diagonal), randn(*shape), device=device,
             torch_fn=lambda t: t.tril(diagonal) + 2 * torch.triu(t, diagonal=diagonal))
    check_op(lambda t: t.triu(diagonal), integers(*shape), device=device)
    b = rng().random(shape) < 0.5
    assert wg.tensor(b, device=device).tril(diagonal).tolist() == torch.from_numpy(b).tril(diagonal).tolist()
    with pytest.raises(RuntimeError):
        wg.tensor([1.0, 2.0], device=device).tril()


@pytest.mark.parametrize("value", [0.0, -1e9, 2.5, float("-inf")])
def test_masked_fill(value, device):
    x = randn(3, 4, 5)
    mask = rng().random((4, 1)) < 0.5   # broadcast over x
    check_op(lambda t, m: t.masked_fill(m, value), x, mask, device=device, fd=abs(value) < 10)
    whole = -7 if value == float("-inf") else value   # (an int tensor takes the value truncated)
    check_op(lambda t, m: wg.masked_fill(t, m, whole), integers(4, 5), rng().random((4, 5)) < 0.5, device=device,
             torch_fn=lambda t, m: torch.masked_fill(t, m, whole))
    check_op(lambda t, m, v: t.masked_fill(m, v.sum()), x, mask, randn(2), device=device)   # a 0-d tensor value


def test_masked_fill_errors(device):
    t = wg.tensor(randn(2, 3), device=device)
    with pytest.raises(RuntimeError):
        t.masked_fill(wg.tensor([1, 0, 1], device=device), 0.0)
    with pytest.raises(RuntimeError):
        t.masked_fill(wg.tensor([True, False, True], device=device), wg.tensor([1.0, 2.0], device=device))
    causal = wg.ones(4, 4, device=device).triu(1).bool()   # the attention mask idiom
    scores = wg.tensor(randn(4, 4), device=device).masked_fill(causal, float("-inf")).softmax(-1)
    assert np.allclose(np.triu(scores.numpy(), 1), 0) and np.allclose(scores.numpy().sum(1), 1)


# ---- scatter ----
def _index(shape, size, dim, unique):
    """An index of shape into a dim of size; unique: no place twice along dim (scatter's defined case)."""
    if not unique:
        return rng().integers(-0, size, shape).astype(np.int32)
    picks = np.stack([rng().permutation(size)[:shape[dim]] for _ in range(int(np.prod(shape)) // shape[dim])])
    moved = picks.reshape([s for d, s in enumerate(shape) if d != dim] + [shape[dim]])
    return np.moveaxis(moved, -1, dim).astype(np.int32)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add(dim, device):
    x = randn(4, 5)
    index = _index((3, 5) if dim == 0 else (4, 3), 4 if dim == 0 else 5, dim % 2, unique=False)
    src = randn(5, 6)   # larger than the index: its first index.shape elements are used (torch's backward
    check_op(lambda t, i, s: t.scatter_add(dim, i, s), x, index, src, device=device, grad=(0,))   # refuses it)
    check_op(lambda t, i, s: wg.scatter_add(t, dim, i, s), x, index, src[:index.shape[0], :index.shape[1]],
             device=device, torch_fn=lambda t, i, s: torch.scatter_add(t, dim, i, s))


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(dim, device):
    x = randn(4, 5)
    index = _index((3, 5) if dim == 0 else (4, 3), 4 if dim == 0 else 5, dim, unique=True)
    check_op(lambda t, i, s: t.scatter(dim, i, s), x, index, randn(*index.shape), device=device)
    check_op(lambda t, i: t.scatter(dim, i, 2.5), x, index, device=device)
    check_op(lambda t, i, s: t.scatter(dim, i, s, reduce="add"), x, index, randn(*index.shape), device=device,
             torch_fn=lambda t, i, s: t.scatter_add(dim, i, s))
    check_op(lambda t, i, s: wg.scatter(t, dim, i, s), integers(4, 5), index, integers(*index.shape), device=device,
             torch_fn=lambda t, i, s: torch.scatter(t, dim, i, s))


def test_scatter_errors(device):
    t = wg.tensor(randn(3, 4), device=device)
    bad = [lambda m, x: m.scatter_add(x, 0, m.tensor([[0]]).float(), x),      # a float index
           lambda m, x: m.scatter_add(x, 0, m.tensor([0, 1]), x),             # fewer dims than x
           lambda m, x: m.scatter_add(x, 1, m.tensor([[0, 1, 2, 0, 1]]), x)]  # index larger than src
    for call in bad:
        with pytest.raises(RuntimeError):
            call(torch, torch.randn(3, 4))
        with pytest.raises(RuntimeError):
            call(_Namespace(device), t)


class _Namespace:
    """wg's functions with tensors made on one device (for calls shared with torch)."""

    def __init__(self, device):
        self.device = device

    def tensor(self, data):
        return wg.tensor(data, device=self.device)

    def __getattr__(self, name):
        return getattr(wg, name)


# ---- one_hot ----
@pytest.mark.parametrize("shape", [(7,), (3, 4), ()])
def test_one_hot(shape, device):
    x = integers(*shape, low=0, high=6)
    for classes in (-1, 6, 9):
        got = F.one_hot(wg_tensor(x, device), classes)
        expected = TF.one_hot(torch.from_numpy(np.asarray(x, np.int64)), classes)
        assert got.dtype is wg.int32 and got.tolist() == expected.tolist(), tag(f"one_hot({classes})")


def test_one_hot_errors(device):
    for bad, classes in (([1.0, 2.0], -1), ([], -1)):
        with pytest.raises(RuntimeError):
            F.one_hot(wg.tensor(bad, device=device), classes)
    if device == "cpu":   # class values are checked on cpu (on webgpu, as on CUDA, they are not read back)
        for bad, classes in (([-1, 2], -1), ([3, 2], 3)):
            with pytest.raises(RuntimeError):
                F.one_hot(wg.tensor(bad, device=device), classes)
            with pytest.raises(RuntimeError):
                TF.one_hot(torch.tensor(bad), classes)


# ---- einsum ----
EINSUM = [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(5,), (5,)]),
          ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
          ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
          ("ij,jk", [(3, 4), (4, 5)]), ("ba", [(3, 4)]), ("bi,bi->b", [(3, 4), (3, 4)]),
          ("ij,kj->ik", [(3, 4), (5, 4)]),
          ("i,i,i->i", [(4,), (4,), (4,)]), ("ab,cd->abcd", [(2, 3), (4, 5)]), ("ij,ij->ij", [(1, 4), (3, 4)]),
          ("...i,i->...", [(2, 3, 4), (4,)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("i->", [(6,)])]


@pytest.mark.parametrize("equation,shapes", EINSUM)
def test_einsum(equation, shapes, device):
    inputs = [randn(*s) for s in shapes]
    check_op(lambda *ts: wg.einsum(equation, *ts), *inputs, device=device,
             torch_fn=lambda *ts: torch.einsum(equation, *ts))
    check_op(lambda *ts: wg.einsum(equation, list(ts)), *inputs, device=device,
             torch_fn=lambda *ts: torch.einsum(equation, list(ts)), fd=False)


def test_einsum_errors(device):
    a = wg.tensor(randn(3, 4), device=device)
    with pytest.raises(RuntimeError):
        wg.einsum("ij,jk->ik", a, a)          # sizes disagree
    with pytest.raises(RuntimeError):
        wg.einsum("ijk->i", a)                 # more subscripts than dims
    with pytest.raises(NotImplementedError):
        wg.einsum("ii->i", wg.tensor(randn(3, 3), device=device))   # a diagonal
