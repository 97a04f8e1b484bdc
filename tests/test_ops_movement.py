"""Views (reshape, permute, expand, slicing, ...) and data movement (cat, stack, gather, index_select)."""
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
    with pytest.raises(RuntimeError):
        x.T.view(12)


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


# ---- basic indexing ----
INDICES = [
    1, -1, -5, slice(1, 3), slice(None, None, 2), slice(1, None, 3), slice(-3, -1), slice(5, 100), slice(4, 2),
    (1, 2), (-1, -2, -3), (slice(None), 2), (slice(1, 4), slice(None, None, 2), -2), (Ellipsis, 0),
    (0, Ellipsis), (Ellipsis,), (None,), (None, 1), (slice(None), None, slice(1, None)), (1, None, Ellipsis, None),
    (Ellipsis, None), (2, slice(None, None, 3), Ellipsis), (slice(None, None, 4), slice(None, None, 5), slice(None, None, 6)),
    (slice(None, 0),),
]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_basic_indexing(index, device):
    a = randn(5, 6, 7)
    out = check_op(lambda t: t[index], a, device=device, np_fn=lambda x: x[index])[0]
    assert out.shape == a[index].shape


def test_indexing_0d_and_1d(device):
    check_op(lambda t: t[...], randn(), device=device)
    check_op(lambda t: t[None], randn(), device=device)
    check_op(lambda t: t[3], randn(257), device=device)
    check_op(lambda t: t[-1], randn(257), device=device)
    check_op(lambda t: t[250:], randn(257), device=device)


def test_indexing_views_of_views(device):
    check_op(lambda t: t.T[1:, ::2][2][1:], randn(6, 8), device=device)
    check_op(lambda t: t[:, 1:].mT[::2, None, 1], randn(4, 5, 6), device=device)


def test_indexing_errors(device):
    x = wg_tensor(randn(5, 6), device)
    for index in (5, -6, (0, 6), (0, -7), (0, 0, 0), (Ellipsis, 1, 1, 1)):
        with pytest.raises(IndexError):
            x[index]
    with pytest.raises(IndexError):
        x[..., ...]
    with pytest.raises(ValueError):
        x[::-1]
    with pytest.raises((TypeError, IndexError)):
        x["a"]
    with pytest.raises(IndexError):
        wg_tensor(randn(), device)[0]


def test_iteration_and_len(device):
    a = randn(3, 4)
    x = wg_tensor(a, device)
    assert len(x) == 3
    for row, expected in zip(x, a):
        assert_close(row, expected)


# ---- tensor indexing ----
@pytest.mark.parametrize("index_shape", [(4,), (2, 3), (1,), (0,)])
def test_tensor_indexing(index_shape, device):
    x = randn(6, 5)
    idx = integers(*index_shape, low=0, high=6)
    check_op(lambda t, i: t[i], x, idx, device=device)


def test_tensor_indexing_repeats_accumulate_and_negative_indices(device):
    x = randn(6, 3, 2)
    idx = np.array([5, 1, 5, -1, 0, -6, 1, 1], np.int32)
    check_op(lambda t, i: t[i], x, idx, device=device)
    check_op(lambda t: t[[2, 2, 0, -2]], x, device=device)


def test_tensor_indexing_rejects_floats_and_masks(device):
    x = wg_tensor(randn(4, 3), device)
    with pytest.raises(IndexError):
        x[wg.tensor([0.0, 1.0], device=device)]
    with pytest.raises(TypeError):
        x[wg.tensor([True, False, True, True], device=device)]


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


# ---- gather / index_select ----
@pytest.mark.parametrize("along", [2, 7])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim, along, device):
    x = randn(4, 5, 6)
    shape = [3, 4, 5]                                 # smaller than x outside `dim`
    shape[dim] = along                                # shorter, or longer (repeats), than x along `dim`
    index = integers(*shape, low=0, high=x.shape[dim])
    check_op(lambda t, i: t.gather(dim, i), x, index, device=device,
             np_fn=lambda a, i: np.take_along_axis(a[tuple(slice(0, s) if d != dim % 3 else slice(None)
                                                          for d, s in enumerate(i.shape))], i, dim))
    check_op(lambda t, i: wg.gather(t, dim, i), x, index, device=device,
             torch_fn=lambda t, i: torch.gather(t, dim, i))


def test_gather_full_shape_and_views(device):
    x = randn(6, 257)
    index = integers(6, 257, low=0, high=257)
    check_op(lambda t, i: t.gather(1, i), x, index, device=device)
    check_op(lambda t, i: t.T.gather(0, i.T), x, index, device=device)


@pytest.mark.parametrize("count", [2, 9])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select(dim, count, device):
    x = randn(4, 5, 6)
    index = integers(count, low=0, high=x.shape[dim])  # fewer or more entries (repeats) than the dim
    check_op(lambda t, i: t.index_select(dim, i), x, index, device=device,
             np_fn=lambda a, i: np.take(a, i, axis=dim))
    check_op(lambda t, i: wg.index_select(t, dim, i), x, index, device=device,
             torch_fn=lambda t, i: torch.index_select(t, dim, i))


def test_repeated_indices_accumulate_gradient(device):
    x = wg_tensor(randn(3, 4), device, requires_grad=True)
    x.index_select(0, wg.tensor([2, 0, 2, 2], device=device)).sum().backward()
    assert_close(x.grad, np.array([[1] * 4, [0] * 4, [3] * 4], np.float32), what="index_select grad")
    y = wg_tensor(randn(2, 5), device, requires_grad=True)
    y.gather(1, wg.tensor([[4, 4, 1], [0, 0, 0]], device=device)).sum().backward()
    assert_close(y.grad, np.array([[0, 1, 0, 0, 2], [3, 0, 0, 0, 0]], np.float32), what="gather grad")


def test_gather_errors(device):
    x = wg_tensor(randn(3, 4), device)
    with pytest.raises(RuntimeError):
        x.gather(1, wg.tensor([[0.0]], device=device))      # float index
    with pytest.raises(RuntimeError):
        x.gather(1, wg.tensor([0, 1], device=device))       # wrong ndim
    with pytest.raises(IndexError):
        x.gather(2, wg.tensor([[0]], device=device))
    with pytest.raises(TypeError):
        x.index_select(0, [0, 1])
    with pytest.raises(IndexError):
        x.index_select(0, wg.tensor([[0, 1]], device=device))
    with pytest.raises(RuntimeError):
        x.index_select(0, wg.tensor([0.5], device=device))


def test_out_of_range_gather_raises_on_cpu():
    x = wg_tensor(randn(3, 4), "cpu")
    with pytest.raises(IndexError):
        x.gather(1, wg.tensor([[4]], device="cpu"))


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
