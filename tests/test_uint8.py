"""uint8 tensors against torch: copies of strided views, cat and stack, writes through views, the
arithmetic that wraps modulo 256, casts and creation, on both devices. On webgpu bytes are packed
four to a u32 word, so the sizes are odd and the views start at offsets that are not multiples of 4:
neighbouring elements written by different threads, or dispatches, share words."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.backends.base import View
from webgrad.ops.elementwise import IDENTITY
from conftest import rng, tag

# Views of a (5, 7, 9)-like tensor (or larger: any 3-d one), each as webgrad and torch spell it alike.
VIEWS = {
    "transposed": lambda x: x.transpose(0, 2),
    "permuted": lambda x: x.permute(1, 2, 0),
    "every other": lambda x: x[::2],
    "sliced": lambda x: x[1:, 2:, 1::3],
    "a column": lambda x: x[:, :, 2],
    "transposed slice": lambda x: x.transpose(1, 2)[1:, ::2, 1:],
    "expanded": lambda x: x[:, :1].expand(-1, 4, -1),
}


def odd_shape(ndim=3):
    """Sizes that are not multiples of 4."""
    return tuple(int(s) for s in rng().choice([3, 5, 6, 7, 9, 11], ndim))


def pair(shape, device):
    """The same fresh random bytes as a webgrad tensor on device and a torch tensor."""
    a = rng().integers(0, 256, shape, dtype=np.uint8)
    return wg.tensor(a, device=device), torch.from_numpy(a.copy())


def assert_same(ours, theirs, what):
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), tag(f"{what}: {ours.dtype} vs {theirs.dtype}")
    assert tuple(ours.shape) == tuple(theirs.shape), tag(f"{what}: shape {tuple(ours.shape)} vs {tuple(theirs.shape)}")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=tag(what))


@pytest.mark.parametrize("view", VIEWS)
def test_copies_of_views_match_torch(device, view):
    """contiguous(), clone() and reshape() of strided uint8 views copy them (reshape where no view can
    do), into contiguous tensors."""
    x, t = pair(odd_shape(), device)
    ours, theirs = VIEWS[view](x), VIEWS[view](t)
    assert ours.contiguous().is_contiguous(), tag(view)
    for name, copy in (("contiguous", lambda v: v.contiguous()), ("clone", lambda v: v.clone()),
                       ("reshape", lambda v: v.reshape(-1)), ("flatten", lambda v: v[1:].flatten(1))):
        assert_same(copy(ours), copy(theirs), f"{view} {name}")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_matches_torch(device, dim):
    """Pieces of odd sizes along dim (one of them empty now and then), contiguous or strided views."""
    shape = list(odd_shape())
    ours, theirs = [], []
    for _ in range(int(rng().integers(2, 5))):
        shape[dim] = int(rng().integers(0 if rng().random() < 0.2 else 1, 6))
        strided = rng().random() < 0.5
        for pieces, v in zip((ours, theirs), pair((shape[2], shape[1], shape[0] + 1), device)):
            view = v[..., 1:].transpose(0, 2)   # a transposed slice of a larger tensor, at offset 1
            pieces.append(view if strided else view.contiguous())
    assert_same(wg.cat(ours, dim), torch.cat(theirs, dim), f"cat along {dim} of {[tuple(p.shape) for p in ours]}")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack_matches_torch(device, dim):
    shape = odd_shape(2)
    pieces = [pair(shape, device) for _ in range(int(rng().integers(1, 6)))]
    ours = [x if k % 2 else x.T.contiguous().T for k, (x, _) in enumerate(pieces)]   # every other one strided
    assert_same(wg.stack(ours, dim), torch.stack([t for _, t in pieces], dim), f"stack along {dim}")


def test_writes_through_views_match_torch(device):
    """Assignments and in-place ops into strided uint8 views keep the bytes around them."""
    x, t = pair(odd_shape(), device)
    y, u = pair((x.shape[2],), device)
    steps = [
        ("x[1:, ::2] = row", lambda x, row: x.__setitem__((slice(1, None), slice(None, None, 2)), row)),
        ("x[..., 2] = 44", lambda x, row: x.__setitem__((Ellipsis, 2), 44)),
        ("x.transpose(0, 2)[::2].add_(200)", lambda x, row: x.transpose(0, 2)[::2].add_(200)),
        ("x[:, 1:, 1::3].mul_(row[:1])", lambda x, row: x[:, 1:, 1::3].mul_(row[:1])),
        ("x[2].fill_(255)", lambda x, row: x[2].fill_(255)),
        ("x[mask] = 9", lambda x, row: x.__setitem__(x > 100, 9)),
        ("x.masked_fill_", lambda x, row: x.masked_fill_(x < 20, 1)),
        ("x[:, 0].copy_(x[:, 1])", lambda x, row: x[:, 0].copy_(x[:, 1])),
    ]
    for what, step in steps:
        step(x, y)
        step(t, u)
        assert_same(x, t, what)


def test_arithmetic_wraps_like_torch(device):
    """uint8 with uint8 (or a Python int, or bool) stays uint8, wrapping modulo 256; with int32 it is
    int32, with a float float32; operands broadcast and strided."""
    s0, s1, s2 = odd_shape()
    a, ta = pair((s1, s0, s2), device)
    b, tb = pair((s1, s2), device)
    a, ta = a.transpose(0, 1)[:, 1:], ta.transpose(0, 1)[:, 1:]   # (s0, s1 - 1, s2), strided
    b, tb = b[1:], tb[1:]                                         # (s1 - 1, s2), broadcast
    n = rng().integers(-2**31, 2**31, b.shape).astype(np.int32)
    mask = rng().random(b.shape) < 0.5
    i, ti = wg.tensor(n, device=device), torch.from_numpy(n.copy())
    m, tm = wg.tensor(mask, device=device), torch.from_numpy(mask.copy())
    scalar = int(rng().integers(-1000, 1000))
    cases = {
        "a + b": lambda a, b, i, m, L: a + b, "a - b": lambda a, b, i, m, L: a - b,
        "a * b": lambda a, b, i, m, L: a * b, "-a": lambda a, b, i, m, L: -a,
        "a + int": lambda a, b, i, m, L: a + scalar, "int - a": lambda a, b, i, m, L: scalar - a,
        "a * b + 7": lambda a, b, i, m, L: a * b + 7, "a + bool": lambda a, b, i, m, L: a + m,
        "a + int32": lambda a, b, i, m, L: a + i, "a * float": lambda a, b, i, m, L: a * 1.5,
        "a / 4": lambda a, b, i, m, L: a / 4,
        "maximum": lambda a, b, i, m, L: L.maximum(a, b), "minimum": lambda a, b, i, m, L: L.minimum(a, b),
        "where": lambda a, b, i, m, L: L.where(m, a, b), "clamp": lambda a, b, i, m, L: a.clamp(30, 200),
        "abs": lambda a, b, i, m, L: a.abs(), "a > b": lambda a, b, i, m, L: a > b,
    }
    for what, case in cases.items():
        ours, theirs = case(a, b, i, m, wg), case(ta, tb, ti, tm, torch)
        if theirs.dtype is torch.float32:
            assert ours.dtype is wg.float32, tag(what)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, err_msg=tag(what))
        else:
            assert_same(ours, theirs.to(torch.int32) if theirs.dtype is torch.int64 else theirs, what)


def test_casts_to_uint8_wrap_like_torch(device):
    """float32 (truncated toward zero), int32 and bool to uint8 keep the low byte, as torch's casts do."""
    shape = odd_shape()
    floats = rng().uniform(-1000, 1000, shape).astype(np.float32)
    ints = rng().integers(-2**31, 2**31, shape).astype(np.int32)
    bools = rng().random(shape) < 0.5
    for values in (floats, ints, bools):
        x = wg.tensor(values, device=device).transpose(0, 2)[1:]
        assert_same(x.to(wg.uint8), torch.from_numpy(values).transpose(0, 2)[1:].to(torch.uint8),
                    f"{values.dtype} to uint8")


def test_creation_matches_torch(device):
    shape = odd_shape()
    value = int(rng().integers(0, 256))
    start, step = int(rng().integers(0, 20)), int(rng().integers(1, 9))
    x, t = pair(shape, device)
    for what, make in (("zeros", lambda L, like, on: L.zeros(shape, dtype=L.uint8, device=on)),
                       ("full", lambda L, like, on: L.full(shape, value, dtype=L.uint8, device=on)),
                       ("ones_like", lambda L, like, on: L.ones_like(like)),
                       ("arange", lambda L, like, on: L.arange(start, 256, step, dtype=L.uint8, device=on))):
        ours = make(wg, x, device)
        assert ours.device == device, tag(what)
        assert_same(ours, make(torch, t, "cpu"), what)


def test_jit_replays_uint8_results():
    """Under wg.jit (webgpu work) the maps into uint8 run as recorded (they are not fused: a thread
    writes a word of bytes there) beside fused maps that read bytes; every call matches torch on
    fresh inputs."""
    device, shape = "webgpu", odd_shape(2)

    def fn(L, a, b):
        c = (a + b) * 3               # uint8, wrapping
        return c, L.cat([c, a[1:]]), (c.float() / 255.0 - 0.5) * 2.0
    step = wg.jit(lambda a, b: fn(wg, a, b))
    for call in range(4):
        (a, ta), (b, tb) = pair(shape, device), pair(shape, device)
        for ours, theirs, what in zip(step(a, b), fn(torch, ta, tb), ("sum", "cat", "floats")):
            if theirs.dtype is torch.float32:
                np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6,
                                           err_msg=tag(f"call {call}: {what}"))
            else:
                assert_same(ours, theirs, f"call {call}: {what}")


def test_writes_through_interleaved_views_are_refused():
    """A layout no slice or permutation makes (strides (3, 2) over (2, 3): bytes 0 2 4 3 5 7) has no
    word-by-word packing: the map refuses it by name rather than writing wrong bytes."""
    backend = wg.zeros(1, device="webgpu").backend
    target = wg.zeros(8, dtype=wg.uint8, device="webgpu")
    source = wg.tensor(rng().integers(0, 256, (2, 3), dtype=np.uint8), device="webgpu")
    out = View(target._view.storage, (2, 3), (3, 2), 0, wg.uint8)
    with pytest.raises(TypeError, match="identity cannot write uint8 through a view"):
        backend.map(IDENTITY, (source._view,), (2, 3), wg.uint8, wg.uint8, out=out)
