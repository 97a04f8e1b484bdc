"""Views (reshape, view, permute, expand, narrow, split, ...) and data movement (cat, stack, device copies,
view(dtype)). Indexing, gather and index_select: tests/test_indexing.py."""
import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, randn, random_shape, rng, tag, wg_tensor

VIEWS = {
    "reshape": ((3, 5, 7), lambda t: t.reshape(7, 15)),
    "reshape_tuple": ((3, 5, 7), lambda t: t.reshape((5, 21))),
    "reshape_infer": ((3, 5, 7), lambda t: t.reshape(-1, 7)),
    "reshape_flat": ((3, 5, 7), lambda t: t.reshape(-1)),
    "reshape_0d": ((), lambda t: t.reshape(1, 1)),
    "reshape_to_0d": ((1, 1), lambda t: t.reshape(())),
    "view": ((4, 6), lambda t: t.view(2, 12)),
    "view_infer": ((4, 6), lambda t: t.view(3, -1, 2)),
    "flatten": ((3, 5, 7), lambda t: t.flatten()),
    "flatten_1": ((2, 3, 4, 5), lambda t: t.flatten(1)),
    "flatten_mid": ((2, 3, 4, 5), lambda t: t.flatten(1, 2)),
    "flatten_neg": ((2, 3, 4, 5), lambda t: t.flatten(-3, -2)),
    "flatten_0d": ((), lambda t: t.flatten()),
    "permute": ((3, 5, 7), lambda t: t.permute(2, 0, 1)),
    "permute_tuple": ((2, 3, 4, 5), lambda t: t.permute((3, 1, 0, 2))),
    "permute_neg": ((3, 5, 7), lambda t: t.permute(-1, -3, -2)),
    "transpose": ((3, 5, 7), lambda t: t.transpose(0, 2)),
    "transpose_neg": ((3, 5, 7), lambda t: t.transpose(-1, -2)),
    "T_2d": ((5, 7), lambda t: t.T),
    "t_2d": ((5, 7), lambda t: t.t()),
    "T_3d": ((3, 5, 7), lambda t: t.T),
    "mT": ((3, 5, 7), lambda t: t.mT),
    "expand": ((3, 1, 7), lambda t: t.expand(3, 4, 7)),
    "expand_lead": ((5, 1), lambda t: t.expand(2, 5, 6)),
    "expand_minus1": ((3, 1), lambda t: t.expand(-1, 4)),
    "expand_as": ((1, 4), lambda t: t.expand_as(t.reshape(4, 1) * t)),
    "expand_0d": ((), lambda t: t.expand(3, 2)),
    "squeeze": ((1, 3, 1, 5), lambda t: t.squeeze()),
    "squeeze_dim": ((1, 3, 1, 5), lambda t: t.squeeze(2)),
    "squeeze_neg": ((1, 3, 1, 5), lambda t: t.squeeze(-4)),
    "squeeze_not1": ((1, 3, 1, 5), lambda t: t.squeeze(1)),
    "unsqueeze": ((3, 5), lambda t: t.unsqueeze(0)),
    "unsqueeze_mid": ((3, 5), lambda t: t.unsqueeze(1)),
    "unsqueeze_end": ((3, 5), lambda t: t.unsqueeze(2)),
    "unsqueeze_neg": ((3, 5), lambda t: t.unsqueeze(-1)),
    "unsqueeze_0d": ((), lambda t: t.unsqueeze(0)),
    "contiguous": ((3, 5), lambda t: t.T.contiguous()),
    "clone": ((3, 5), lambda t: t.clone()),
    # chains: reshape of non-contiguous views must copy, views of views keep composing
    "permute_reshape": ((3, 5, 7), lambda t: t.permute(1, 2, 0).reshape(5, 21)),
    "transpose_flatten": ((4, 6), lambda t: t.T.flatten()),
    "expand_reshape": ((3, 1), lambda t: t.expand(3, 4).reshape(12)),
    "slice_reshape": ((6, 8), lambda t: t[1::2, ::3].reshape(-1)),
    "chain": ((2, 3, 4), lambda t: t.unsqueeze(1).expand(2, 5, 3, 4).permute(3, 1, 0, 2)[1:, ::2].mT),
}


@pytest.mark.filterwarnings("ignore:The use of `x.T`")   # torch deprecates .T beyond 2-D; webgrad reverses dims
@pytest.mark.parametrize("name", list(VIEWS))
def test_views(name, device):
    shape, fn = VIEWS[name]
    check_op(fn, randn(*shape), device=device)


def test_random_permute_and_reshape(device):
    shape = random_shape(2, 4)
    perm = tuple(int(d) for d in rng().permutation(len(shape)))
    check_op(lambda t: t.permute(perm).reshape(-1) * 2, randn(*shape), device=device)


def test_views_share_storage_and_shapes(device):
    x = wg_tensor(randn(3, 4), device)
    assert x.T.shape == (4, 3) and x.reshape(2, 6).shape == (2, 6) and x.unsqueeze(1).shape == (3, 1, 4)
    assert x.reshape(12)._storage is x._storage and x.T._storage is x._storage and x[1:]._storage is x._storage
    assert not x.T.is_contiguous() and x.T.contiguous().is_contiguous()
    assert x.size() == (3, 4) and x.size(-1) == 4 and x.dim() == 2 and x.numel() == 12


def test_view_of_non_contiguous_raises(device):
    x = wg_tensor(randn(3, 4), device)
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
        x.T.view(12)


def test_view_follows_torchs_stride_rule(device):
    """view on fresh strided views (transposes, narrows, steps) to fresh shapes: where torch views,
    webgrad views (the same strides, offset and values, sharing the storage); where torch raises,
    webgrad raises its RuntimeError."""
    viewed = refused = 0
    # at least 40 cases, and more (up to 400) until both kinds have come up: random shapes may give one kind only
    while (viewed + refused < 40 or not (viewed and refused)) and viewed + refused < 400:
        a = randn(*[int(s) for s in rng().integers(1, 5, int(rng().integers(2, 5)))])
        t, x = torch.from_numpy(a.copy()), wg_tensor(a, device)
        for _ in range(int(rng().integers(1, 3))):
            d, e = (int(v) for v in rng().integers(0, t.ndim, 2))
            kind = rng().integers(3)
            if kind == 0:
                t, x = t.transpose(d, e), x.transpose(d, e)
            elif kind == 1:
                length = int(rng().integers(1, t.shape[d] + 1))
                start = int(rng().integers(0, t.shape[d] - length + 1))
                t, x = t.narrow(d, start, length), x.narrow(d, start, length)
            else:
                step = (slice(None),) * d + (slice(None, None, 2),)
                t, x = t[step], x[step]
        target = tuple(int(s) for s in rng().permutation(_factors(t.numel()) + [1] * int(rng().integers(0, 2))))
        try:
            expected = t.view(target)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                x.view(target)
            refused += 1
            continue
        got = x.view(target)
        viewed += 1
        assert got._storage is x._storage and got.stride() == expected.stride(), tag(
            f"{tuple(t.shape)} {t.stride()} -> {target}: strides {got.stride()} vs torch {expected.stride()}")
        assert got.storage_offset() == expected.storage_offset() and got.is_contiguous() == expected.is_contiguous()
        assert_close(got, expected, what=f"{tuple(t.shape)} {t.stride()} viewed as {target}")
    assert viewed and refused, tag(f"{viewed} viewed, {refused} refused: both kinds should come up")


def _factors(n):
    """n as a list of factors (some 1s and repeats kept), for a random shape of n elements."""
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out or [1]


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize("name,fn", [
    ("view after narrow", lambda t: t.narrow(1, 1, 3).view(2, 3, 3, 2)),
    ("view merging a transposed pair", lambda t: t.transpose(0, 1).view(4, 2, 3, 2)),
    ("view splitting a transposed dim", lambda t: t.transpose(2, 3).view(2, 2, 2, 2, 3)),
    ("view_as", lambda t: t.view_as(t.reshape(8, 6).T.T)),
    ("reshape_as", lambda t: t.transpose(1, 2).reshape_as(t.reshape(6, 8))),
    ("flatten function", lambda t: torch_or_wg(t).flatten(t, 1, 2)),
    ("unflatten", lambda t: t.unflatten(1, (2, -1))),
    ("unflatten function", lambda t: torch_or_wg(t).unflatten(t.flatten(), 0, (4, 12))),
    ("movedim", lambda t: t.movedim(0, -1)),
    ("movedim lists", lambda t: torch_or_wg(t).movedim(t, (0, 3), (2, 0))),
    ("moveaxis", lambda t: t.moveaxis(-1, 1)),
    ("swapaxes", lambda t: t.swapaxes(0, 2)),
    ("swapdims function", lambda t: torch_or_wg(t).swapdims(t, 1, -1)),
    ("transpose function", lambda t: torch_or_wg(t).transpose(t, 0, 1)),
    ("permute function", lambda t: torch_or_wg(t).permute(t, (3, 1, 0, 2))),
    ("reshape function", lambda t: torch_or_wg(t).reshape(t, (6, -1))),
    ("squeeze dims", lambda t: t[:, :1, :, :1].squeeze((1, 3))),
    ("squeeze function", lambda t: torch_or_wg(t).squeeze(t[:1], 0)),
    ("unsqueeze function", lambda t: torch_or_wg(t).unsqueeze(t, 2)),
    ("expand_as", lambda t: t[:, :1].expand_as(t)),
    ("t function", lambda t: torch_or_wg(t).t(t[0, 0])),
    ("narrow", lambda t: t.narrow(-1, 1, 1) * 2),
    ("narrow function", lambda t: torch_or_wg(t).narrow(t, 0, 1, 1)),
    ("narrow negative start", lambda t: t.narrow(2, -2, 2)),
    ("select", lambda t: t.select(1, -1)),
    ("split", lambda t: t.split(3, 1)),
    ("split sizes", lambda t: torch_or_wg(t).split(t, [1, 0, 2], dim=2)),
    ("chunk", lambda t: t.chunk(3, -1)),
    ("chunk more than the size", lambda t: torch_or_wg(t).chunk(t, 5, 0)),
    ("unbind", lambda t: t.unbind(1)),
    ("unbind function", lambda t: torch_or_wg(t).unbind(t, -1)),
])
def test_views_and_splits_match_torch(name, fn, device):
    check_op(fn, randn(2, 4, 3, 2) if "unflatten" not in name else randn(2, 6, 4), device=device)


def torch_or_wg(t):
    return wg if isinstance(t, wg.Tensor) else torch


def test_view_and_split_errors(device):
    x = wg_tensor(randn(4, 6), device)
    cases = [(lambda L, t: t.narrow(1, 5, 2), RuntimeError, "exceeds dimension size"),
             (lambda L, t: t.narrow(0, 5, 0), IndexError, "start out of range"),
             (lambda L, t: t.split([2, 3], 0), RuntimeError, "split_with_sizes expects split_sizes to sum exactly"),
             (lambda L, t: t.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0"),
             (lambda L, t: t.unflatten(1, (4, -1)), RuntimeError, "unflatten"),
             (lambda L, t: t.movedim((0, 1), (0, 0)), RuntimeError, r"repeated dim in `destination` \(\[0, 0\]\)"),
             (lambda L, t: t.movedim((0, 1), (0,)), RuntimeError, "should contain the same number of dims"),
             (lambda L, t: t.flatten(1, 0), RuntimeError, "start_dim cannot come after end_dim"),
             (lambda L, t: t.view(5, -1), RuntimeError, "invalid for input of size 24"),
             (lambda L, t: t.select(2, 0), IndexError, "range")]
    for call, error, words in cases:
        with pytest.raises(error):
            call(torch, torch.from_numpy(x.numpy()))
        with pytest.raises(error, match=words):
            call(wg, x)


def test_layout_queries_match_torch(device):
    a = randn(3, 4, 5)
    for how in (lambda t: t, lambda t: t[1:, ::2], lambda t: t.transpose(0, 2), lambda t: t[:, 1:2].expand(3, 6, 5),
                lambda t: t.narrow(2, 1, 3)[None]):
        got, want = how(wg_tensor(a, device)), how(torch.from_numpy(a.copy()))
        assert (got.nelement(), got.numel(), got.dim(), got.ndimension(), got.ndim) == \
            (want.nelement(), want.numel(), want.dim(), want.ndimension(), want.ndim)
        assert tuple(got.size()) == tuple(want.size()) and tuple(got.shape) == tuple(want.shape)
        assert got.size(-1) == want.size(-1) and got.stride() == want.stride() and got.stride(0) == want.stride(0)
        assert got.storage_offset() == want.storage_offset() and got.is_contiguous() == want.is_contiguous()
        contiguous = got.contiguous()
        assert contiguous.is_contiguous() and (contiguous is got) == got.is_contiguous()
        assert_close(contiguous, want.contiguous())


@pytest.mark.parametrize("fn,error", [
    (lambda x: x.reshape(5, 5), RuntimeError),
    (lambda x: x.reshape(-1, -1), RuntimeError),
    (lambda x: x.view(7, -1), RuntimeError),
    (lambda x: x.permute(0, 1), RuntimeError),
    (lambda x: x.permute(0, 0, 1), RuntimeError),
    (lambda x: x.expand(3, 5, 7), RuntimeError),
    (lambda x: x.expand(4), RuntimeError),
    (lambda x: x.transpose(0, 3), IndexError),
    (lambda x: x.permute(0, 1, 3), IndexError),
    (lambda x: x.squeeze(3), IndexError),
    (lambda x: x.unsqueeze(4), IndexError),
    (lambda x: x.unsqueeze(-5), IndexError),
    (lambda x: x.flatten(0, 3), IndexError),
    (lambda x: x.size(3), IndexError),
])
def test_bad_views_raise(fn, error, device):
    with pytest.raises(error):
        fn(wg_tensor(randn(2, 3, 4), device))


# ---- cat / stack ----
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_cat(dim, device):
    base = [3, 4, 5]
    inputs = []
    for size in (1, 6, 2):
        shape = list(base)
        shape[dim] = size
        inputs.append(randn(*shape))
    check_op(lambda a, b, c: wg.cat([a, b, c], dim), *inputs, device=device,
             torch_fn=lambda a, b, c: torch.cat([a, b, c], dim), np_fn=lambda a, b, c: np.concatenate([a, b, c], dim))


def test_cat_of_views_and_large_sizes(device):
    check_op(lambda a, b: wg.cat([a.T, b[:, ::2], a.T * 2], 1), randn(5, 4), randn(4, 9), device=device,
             torch_fn=lambda a, b: torch.cat([a.T, b[:, ::2], a.T * 2], 1))
    check_op(lambda a, b: wg.cat((a, b)), randn(1000), randn(257), device=device,
             torch_fn=lambda a, b: torch.cat((a, b)))
    check_op(lambda a, b: wg.cat([a.expand(3, 4), b], 0), randn(1, 4), randn(2, 4), device=device,
             torch_fn=lambda a, b: torch.cat([a.expand(3, 4), b], 0))


def test_cat_single_empty_and_int(device):
    check_op(lambda a: wg.cat([a], 0), randn(3, 2), device=device, torch_fn=lambda a: torch.cat([a], 0))
    check_op(lambda a, b: wg.cat([a, b], 0), randn(0, 3), randn(2, 3), device=device,
             torch_fn=lambda a, b: torch.cat([a, b], 0))
    check_op(lambda a, b: wg.cat([a, b], 1), integers(2, 3), integers(2, 2), device=device,
             torch_fn=lambda a, b: torch.cat([a, b], 1))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dim, device):
    a, b, c = randn(3, 5), randn(3, 5), randn(3, 5)
    check_op(lambda x, y, z: wg.stack([x, y.T.T, z], dim), a, b, c, device=device,
             torch_fn=lambda x, y, z: torch.stack([x, y, z], dim), np_fn=lambda x, y, z: np.stack([x, y, z], dim))


def test_cat_and_stack_errors(device):
    a, b = wg_tensor(randn(2, 3), device), wg_tensor(randn(2, 4), device)
    with pytest.raises(RuntimeError):
        wg.cat([a, b], 0)
    with pytest.raises(RuntimeError):
        wg.cat([a, wg_tensor(randn(2, 3, 1), device)], 0)
    with pytest.raises(IndexError):
        wg.cat([a, a], 2)
    with pytest.raises(ValueError):
        wg.cat([], 0)
    with pytest.raises(RuntimeError):
        wg.stack([a, b])
    other = "webgpu" if device == "cpu" else "cpu"
    with pytest.raises(RuntimeError, match="cpu.*webgpu|webgpu.*cpu"):
        wg.cat([a, wg_tensor(randn(2, 3), other)], 0)


# ---- device transfers ----
def _other(device):
    return "webgpu" if device == "cpu" else "cpu"


def test_to_device_round_trip_with_gradient():
    a = randn(3, 5, 7)
    for src, dst in (("cpu", "webgpu"), ("webgpu", "cpu")):
        check_op(lambda t: (t.to(_other(t.device)) * 2).exp().to(t.device).sum(1), a, device=src,
                 torch_fn=lambda t: (t * 2).exp().sum(1), fd=False)  # float64 cannot visit webgpu
        x = wg_tensor(a, src, requires_grad=True)
        y = x.to(dst)
        assert y.device == dst and y.requires_grad
        (y * y).sum().backward()
        assert x.grad.device == src, tag("gradient did not come back to the source device")
        assert_close(x.grad, 2 * a, what=f"{src}->{dst} gradient")


# ---- view(dtype) ----
@pytest.mark.parametrize("src,dst", [("uint8", "int32"), ("int32", "uint8"), ("float32", "int32"),
                                     ("int32", "float32"), ("uint8", "float32"), ("float32", "uint8")])
def test_view_dtype_reinterprets_bytes_like_torch(src, dst, device):
    a = rng().integers(0, 256, (3, 4, 8)).astype(np.uint8).view(src)   # any bytes, as each dtype
    if src == "float32":
        a = randn(3, 4, 2)
    x = wg_tensor(a, device, dtype=getattr(wg, src))
    y = x.view(getattr(wg, dst))
    expected = torch.from_numpy(a.copy()).view(getattr(torch, dst))
    assert y.dtype is getattr(wg, dst) and tuple(y.shape) == tuple(expected.shape) and y.device == device
    assert y._storage is x._storage or device == "cpu"   # no copy (a NumPy view on cpu)
    np.testing.assert_array_equal(y.numpy().view(np.uint8), expected.numpy().view(np.uint8), err_msg=tag())
    # views of views: rows of a slice, and after a gather of the wider type (packed uint8 rows)
    rows = x[1:3].view(getattr(wg, dst))
    np.testing.assert_array_equal(rows.numpy().view(np.uint8), expected[1:3].numpy().view(np.uint8), err_msg=tag())


def test_view_dtype_unpacks_gathered_uint8_rows(device):
    pixels = rng().integers(0, 256, (5, 12), dtype=np.uint8)
    words = wg.tensor(pixels, device=device).view(wg.int32)          # (5, 3): four bytes a word
    picked = words[wg.tensor([4, 0, 4], device=device)]               # gathered as int32
    assert_close(picked.view(wg.uint8).float(), pixels[[4, 0, 4]].astype(np.float32), what="unpacked rows")


def test_view_dtype_errors(device):
    x = wg.tensor(np.arange(12, dtype=np.uint8).reshape(3, 4), device=device)
    with pytest.raises(RuntimeError, match="does not split"):
        x[:, 1:].view(wg.int32)                       # 3 bytes a row
    with pytest.raises(RuntimeError, match="stride 1"):
        wg.zeros(4, 2, dtype=wg.int32, device=device).T.view(wg.uint8)
    with pytest.raises(TypeError, match="can be reinterpreted"):
        x.view(wg.bool)
    with pytest.raises(RuntimeError, match="not differentiable"):
        wg.ones(4, device=device, requires_grad=True).view(wg.int32)
    assert x.view(wg.uint8) is x and x.view(3, 4).shape == (3, 4)
