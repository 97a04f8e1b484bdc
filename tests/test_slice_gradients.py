"""Gradients of slices (split, chunk, narrow, x[a:b:s], unbind): the backward pass keeps one tensor's
slice gradients apart until all have come and writes them into one buffer (autograd.WindowGrad), as
torch's SplitBackward concatenates. Checked against torch on random shapes: every piece used (the
pieces tile the tensor), some unused (zeros elsewhere), overlapping and strided windows (summed), and
windows mixed with a gradient of the whole."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import randn, rng


def _compare(device, shape, use):
    x = randn(*shape)
    ours = wg.tensor(x, device=device, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    weights = [randn(*shape) for _ in range(4)]
    for lib, v in ((wg, ours), (torch, theirs)):
        w = [lib.tensor(a) if lib is torch else wg.tensor(a, device=device) for a in weights]
        use(v, w).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-5)


def _sized(v, w, piece):
    """A weighted sum of piece (a slice of v) against the same window of w."""
    return (piece * w.reshape(v.shape)[tuple(slice(0, n) for n in piece.shape)]).sum()


@pytest.mark.parametrize("case", ["all_pieces", "some_pieces", "overlapping", "strided", "with_whole", "unbind"])
def test_slice_gradients_match_torch(device, case):
    r = rng()
    shape = tuple(int(n) for n in r.integers(2, 7, size=3)) + (int(r.integers(6, 13)),)
    size = int(r.integers(1, shape[-1]))

    def use(v, w):
        pieces = v.split(size, dim=-1)
        if case == "all_pieces":
            return sum(_sized(v, w[k % 4], p * (k + 1)) for k, p in enumerate(pieces))
        if case == "some_pieces":
            return sum(_sized(v, w[0], p) for p in pieces[::2])
        if case == "overlapping":
            return _sized(v, w[0], v[:, 1:]) + _sized(v, w[1], v[:, :-1]) + _sized(v, w[2], v.narrow(-1, 1, 2))
        if case == "strided":
            return _sized(v, w[0], v[::2, :, 1::3]) + _sized(v, w[1], v[1::2])
        if case == "with_whole":
            return _sized(v, w[0], pieces[0]) + (v * w[1]).sum() + _sized(v, w[2], pieces[-1])
        return sum(_sized(v, w[0], p.unsqueeze(1)) * (k + 1) for k, p in enumerate(v.unbind(1)))

    _compare(device, shape, use)


def test_a_split_whose_pieces_are_all_used_writes_its_gradient_once(monkeypatch):
    """All pieces used: one write per piece into a buffer never zero-filled, and no sums."""
    from webgrad.ops import creation
    fills, real_zeros = [], creation.zeros
    monkeypatch.setattr(creation, "zeros", lambda *a, **k: fills.append(a) or real_zeros(*a, **k))
    v = wg.tensor(randn(4, 9), device="webgpu", requires_grad=True)
    q, k, w = v.split(3, dim=1)
    (q.sum() + (k * 2).sum() + (w * w).sum()).backward()
    assert not fills, "the pieces tile the tensor: nothing to zero"
    np.testing.assert_allclose(v.grad.numpy()[:, 6:], 2 * v.detach().numpy()[:, 6:], rtol=1e-6)
