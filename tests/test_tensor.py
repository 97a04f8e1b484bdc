"""Tensor creation, dtypes, host transfer, .to(), 0-d and empty tensors, and error messages (random
creation: tests/test_random.py)."""

import numpy as np
import pytest
import torch

import webgrad as wg
from conftest import assert_close, check_op, integers, randn, rng, tag, wg_tensor


# ---- wg.tensor from host data ----
@pytest.mark.parametrize("values,dtype", [
    ([[1.0, 2.0], [3.0, 4.0]], wg.float32),
    ([[1, 2, 3], [4, 5, 6]], wg.int32),
    ([True, False, True], wg.bool),
    ([1, 2.5, 3], wg.float32),            # mixed ints and floats -> float
    ([[[1], [2]], [[3], [4]]], wg.int32),
    (3.5, wg.float32),
    (7, wg.int32),
    (False, wg.bool),
    ([], wg.float32),                     # as in torch: empty data is float32
    ([[], []], wg.float32),
    ((1.0, 2.0), wg.float32),
])
def test_tensor_from_python_lists(values, dtype, device):
    t = wg.tensor(values, device=device)
    expected = torch.tensor(values)
    assert t.dtype is dtype, tag(f"{values!r} inferred {t.dtype}, expected {dtype}")
    assert tuple(t.shape) == tuple(expected.shape) and t.device == device
    assert t.tolist() == expected.tolist()


def test_tensor_from_numpy_arrays(device):
    cases = [(randn(3, 4), wg.float32), (randn(2, 5).astype(np.float64), wg.float32),
             (integers(3, 2), wg.int32), (integers(7).astype(np.int64), wg.int32),
             (rng().integers(0, 256, (5, 3)).astype(np.uint8), wg.uint8),
             (np.asarray(rng().random(9) < 0.5), wg.bool), (np.float32(2.5), wg.float32),
             (randn(4, 6).T, wg.float32)]                       # a non-contiguous array
    for arr, dtype in cases:
        t = wg.tensor(arr, device=device)
        assert t.dtype is dtype, tag(f"{arr.dtype} -> {t.dtype}")
        assert_close(t, np.asarray(arr).astype(t.numpy().dtype), what=f"round trip of {arr.dtype}")


def test_tensor_with_explicit_dtype(device):
    assert wg.tensor([1, 2], dtype=wg.float32, device=device).tolist() == [1.0, 2.0]
    assert wg.tensor([1.7, -1.7], dtype=wg.int32, device=device).tolist() == [1, -1]
    assert wg.tensor([0, 2], dtype=wg.bool, device=device).tolist() == [False, True]
    assert wg.tensor([1, 255], dtype="uint8", device=device).tolist() == [1, 255]
    assert wg.tensor(randn(3), dtype=wg.float64, device="cpu").dtype is wg.float64
    assert wg.tensor([1.5], dtype="float64", device="cpu").numpy().dtype == np.float64


@pytest.mark.parametrize("values,error", [([[1, 2], [3]], ValueError), ([1, [2, 3]], TypeError), ([1, [2]], TypeError),
                                          ([[1, 2], 3], TypeError), ([[[1, 2]], [[1]]], ValueError),
                                          ([[1], [[2]]], TypeError)])
def test_ragged_lists_raise_as_in_torch(values, error, device):   # lengths: ValueError; list vs number: TypeError
    with pytest.raises(error):
        wg.tensor(values, device=device)


def test_unsupported_elements_raise(device):
    with pytest.raises(TypeError):
        wg.tensor(["a", "b"], device=device)
    with pytest.raises(TypeError):
        wg.tensor(np.array([1 + 2j]), device=device)
    with pytest.raises(OverflowError):
        wg.tensor([2 ** 40], device=device)
    with pytest.raises(TypeError):
        wg.tensor([1.0], dtype="complex64", device=device)


def test_tensor_from_tensor_copies(device):
    x = wg_tensor(randn(3), device, requires_grad=True)
    y = wg.tensor(x)
    assert y._storage is not x._storage and not y.requires_grad
    assert_close(y, x.detach())
    assert wg.as_tensor(x) is x


def test_tensor_class_constructs_like_torch(device):
    """torch.Tensor(data) is float32 whatever the data; torch.Tensor(*sizes) / (Size) makes a tensor
    of that shape (zeros here; uninitialised in torch); torch.Tensor() is empty."""
    data = rng().integers(-5, 5, (2, 3)).tolist()
    for args in ((data,), (np.asarray(data, np.int32),), ([True, False],), ((1.5, 2),)):
        got, want = wg.Tensor(*args, device=device), torch.Tensor(*args)
        assert got.dtype is wg.float32 and got.device == device and isinstance(got, wg.Tensor)
        assert_close(got, want, what=f"Tensor{args}")
    for args in ((2, 3), (4,), (wg.Size([2, 1, 3]),), (), (0, 2)):
        got = wg.Tensor(*args, device=device)
        want = torch.Tensor(*[torch.Size(a) if isinstance(a, wg.Size) else a for a in args])
        assert tuple(got.shape) == tuple(want.shape) and got.dtype is wg.float32, tag(f"Tensor{args}")
    with pytest.raises(TypeError):
        torch.Tensor(2.5)
    with pytest.raises(TypeError, match="sequence"):
        wg.Tensor(2.5)
    with pytest.raises(TypeError):
        wg.Tensor(2, "a")


# ---- constant and range constructors ----
def test_zeros_ones_full(device):
    for make, value in ((wg.zeros, 0.0), (wg.ones, 1.0)):
        for args in ((3,), (2, 3), ((2, 3),), ([4, 1, 2],), ()):
            t = make(*args, device=device)
            shape = args[0] if args and isinstance(args[0], (tuple, list)) else args
            assert t.shape == tuple(shape) and t.dtype is wg.float32 and t.device == device
            assert_close(t, np.full(tuple(shape), value, np.float32))
    assert wg.zeros(2, dtype=wg.int32, device=device).tolist() == [0, 0]
    assert wg.ones(2, dtype=wg.bool, device=device).tolist() == [True, True]
    assert_close(wg.full((2, 3), 2.5, device=device), np.full((2, 3), 2.5))
    assert wg.full((2,), 7, device=device).dtype is wg.int32
    assert wg.full((2,), True, device=device).dtype is wg.bool
    assert wg.full(3, -1.0, device=device).tolist() == [-1.0] * 3
    x = wg_tensor(randn(2, 5), device)
    for like, value in ((wg.zeros_like(x), 0), (wg.ones_like(x), 1), (wg.full_like(x, 3.0), 3)):
        assert like.shape == x.shape and like.device == device
        assert_close(like, np.full((2, 5), value, np.float32))
    with pytest.raises(RuntimeError):
        wg.zeros(-1, 2, device=device)


@pytest.mark.parametrize("args", [(5,), (0,), (2, 9), (-3, 4), (10, 0, -1), (7, -8, -3), (0, 1, 0.1),
                                  (1.0, -1.0, -0.3), (0.5, 5), (3, 3), (0, 1000), (-2.5, 2.5, 0.5)])
def test_arange(args, device):
    t = wg.arange(*args, device=device)
    expected = torch.arange(*args)
    assert (t.dtype is wg.int32) == (not expected.dtype.is_floating_point), tag(f"{args}: {t.dtype}")
    assert_close(t, expected.numpy().astype(np.float32 if t.dtype is wg.float32 else np.int32), atol=1e-6,
                 what=f"arange{args}")
    assert wg.arange(4, dtype=wg.float32, device=device).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="step must be nonzero"):   # torch's class and words
        wg.arange(0, 5, 0, device=device)


# ---- integer, byte and bool tensors ----
def test_int32_tensors(device):
    a = integers(3, 5, low=-1000, high=1000)
    t = wg.tensor(a, device=device)
    assert t.dtype is wg.int32 and t.numpy().dtype == np.int32
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t[1:, ::2].numpy(), a[1:, ::2])
    assert t[0, 0].item() == int(a[0, 0]) and isinstance(t[0, 0].item(), int)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 257, 1000])
def test_uint8_upload_float_and_readback(n, device):
    a = rng().integers(0, 256, n).astype(np.uint8)
    t = wg.tensor(a, device=device)
    assert t.dtype is wg.uint8 and t.shape == (n,)
    np.testing.assert_array_equal(t.numpy(), a, err_msg=tag("uint8 round trip"))
    assert t.tolist() == a.tolist()
    assert_close(t.float(), a.astype(np.float32), what="uint8 -> float32")
    assert_close(t.int(), a.astype(np.int32), what="uint8 -> int32")
    assert_close(t.float() / 255, a / np.float32(255), what="uint8 scaled")
    assert_close(wg.frombuffer(a.tobytes(), wg.uint8, device=device), a, what="frombuffer")


def test_uint8_views_readback(device):
    a = rng().integers(0, 256, (7, 9)).astype(np.uint8)
    t = wg.tensor(a, device=device)
    for index in ((slice(1, None), slice(None, None, 2)), (3,), (slice(None), 5), (slice(2, 5), slice(3, 8)),
                  (slice(None, None, 3), slice(1, None, 4))):
        np.testing.assert_array_equal(t[index].numpy(), a[index], err_msg=tag(f"uint8 view {index}"))
        assert_close(t[index].float(), a[index].astype(np.float32), what=f"uint8 view {index} -> float")
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.reshape(3, 21).numpy(), a.reshape(3, 21))
    assert_close(t.T.float(), a.T.astype(np.float32))
    assert t[2, 3].item() == a[2, 3]


def test_uint8_arithmetic_and_reductions(device):
    a = rng().integers(0, 256, (5, 9)).astype(np.uint8)
    t = wg.tensor(a, device=device)
    assert (t + 1).dtype is wg.uint8   # wrapping, as torch's
    assert_close(t + 1, a + np.uint8(1), what="uint8 + int")
    assert_close(t * 0.5, a * np.float32(0.5), what="uint8 * float")
    assert_close(t.sum(), a.astype(np.int64).sum(), what="uint8 sum")
    assert_close(t.sum(1), a.astype(np.int64).sum(1), what="uint8 row sums")
    assert_close(t.float().mean(0), a.mean(0), what="uint8 mean")
    np.testing.assert_array_equal((t > 100).numpy(), a > 100)
    assert_close(t.argmax(1), a.argmax(1), what="uint8 argmax")
    assert_close(t.int().amax(1), a.max(1), what="uint8 -> int32 max")
    assert t.amax(1).dtype is wg.uint8
    assert_close(t.amax(1), a.max(1), what="uint8 amax")
    assert_close(t.T.contiguous(), a.T, what="uint8 transposed copy")


def test_bool_tensors(device):
    m = np.asarray(rng().random((4, 6)) < 0.5)
    t = wg.tensor(m, device=device)
    assert t.dtype is wg.bool and t.numpy().dtype == np.bool_
    np.testing.assert_array_equal(t.numpy(), m)
    np.testing.assert_array_equal(t.T.numpy(), m.T)
    np.testing.assert_array_equal(t[::2, 1:].numpy(), m[::2, 1:])
    assert t.tolist() == m.tolist()
    assert isinstance(t[0, 0].item(), bool)
    assert_close(t.float(), m.astype(np.float32))
    assert_close(t.sum(), m.sum())


# ---- .to(), host transfer ----
def test_to_device_and_dtype(device):
    a = randn(3, 5)
    x = wg.tensor(a, device=device)
    other = "webgpu" if device == "cpu" else "cpu"
    y = x.to(other)
    assert y.device == other and y.dtype is wg.float32
    assert_close(y, a)
    assert x.to(device) is x and x.to(wg.float32) is x
    assert x.to(other).to(device).device == device
    z = x.to(wg.int32)
    assert z.dtype is wg.int32 and z.device == device
    np.testing.assert_array_equal(z.numpy(), a.astype(np.int32))
    w = x.to(other, wg.int32)
    assert w.device == other and w.dtype is wg.int32
    assert x.to(dtype="bool").dtype is wg.bool and x.to(device=other).device == other
    assert x.to(wg.zeros(1, dtype=wg.int32, device=other)).dtype is wg.int32
    assert x.cpu().device == "cpu"
    assert x.T.to(other).shape == (5, 3)
    assert_close(x.T.to(other), a.T)
    assert x.to("webgpu:0").device == "webgpu"
    assert x.float() is x
    with pytest.raises(RuntimeError, match="cuda"):   # torch's class for a device string it does not know
        x.to("cuda")


def test_cpu_float64(device):
    a = randn(4, 3)
    x = wg.tensor(a, device="cpu").double()
    assert x.dtype is wg.float64 and x.numpy().dtype == np.float64
    assert (x.float() * 2).dtype is wg.float32
    assert (x + wg.tensor(a, device="cpu")).dtype is wg.float64
    check_op(lambda t: (t * 2).exp().sum(0), a.astype(np.float64), device="cpu", fd=False)


def test_float64_on_webgpu_raises_type_error():
    with pytest.raises(TypeError, match="float64"):
        wg.tensor([1.0], dtype=wg.float64, device="webgpu")
    with pytest.raises(TypeError, match="float64"):
        wg.tensor([1.0], device="webgpu").double()
    with pytest.raises(TypeError, match="float64"):
        wg.zeros(3, dtype=wg.float64, device="webgpu")
    with pytest.raises(TypeError, match="float64"):
        wg.tensor([1.0], dtype=wg.float64, device="cpu").to("webgpu")
    with pytest.raises(TypeError, match="float64"):
        wg.rand(3, dtype=wg.float64, device="webgpu")


def test_item_tolist_numpy(device):
    a = randn(2, 3)
    x = wg.tensor(a, device=device)
    assert x.tolist() == [[float(v) for v in row] for row in a]
    assert isinstance(x[1, 2].item(), float) and x[1, 2].item() == float(a[1, 2])
    assert float(x[0, 0]) == float(a[0, 0]) and int(wg.tensor([7], device=device)) == 7
    assert bool(wg.tensor([1.0], device=device)) and not bool(wg.tensor(0.0, device=device))
    np.testing.assert_array_equal(x.numpy(), a)
    with pytest.raises(RuntimeError):
        x.item()
    with pytest.raises(RuntimeError):
        bool(x)
    y = wg.tensor(a, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        y.numpy()
    np.testing.assert_array_equal(y.detach().numpy(), a)
    # (tests/test_printing.py checks the text against torch's)
    assert repr(x).startswith("tensor([[") and ("device='webgpu'" in repr(x)) == (device == "webgpu")
    assert "requires_grad=True" in repr(y) and "dtype=webgrad.uint8" in repr(wg.tensor([1], dtype=wg.uint8, device=device))


def test_zero_dim_tensors(device):
    x = wg.tensor(2.5, device=device)
    assert x.shape == () and x.ndim == 0 and x.numel() == 1
    assert x.item() == 2.5 and x.tolist() == 2.5 and x.numpy().shape == ()
    assert (x * wg.tensor([1.0, 2.0], device=device)).tolist() == [2.5, 5.0]
    assert (x + 1).shape == () and x.sum().shape == () and x.reshape(1).shape == (1,)
    assert wg.tensor([[3.0]], device=device).sum().item() == 3.0
    with pytest.raises(TypeError):
        len(x)
    check_op(lambda t: (t * t).exp(), randn(), device=device)


def test_empty_tensors(device):
    e = wg.zeros(0, 3, device=device)
    assert e.shape == (0, 3) and e.numel() == 0 and e.tolist() == [] and e.numpy().shape == (0, 3)
    assert (e + 1).shape == (0, 3) and (e * wg.ones(3, device=device)).shape == (0, 3)
    assert e.T.shape == (3, 0) and e.reshape(3, 0).shape == (3, 0) and e.sum(1).shape == (0,)
    assert_close(e.sum(0), np.zeros(3, np.float32))
    assert_close(e.T @ wg.zeros(0, 2, device=device), np.zeros((3, 2), np.float32))
    assert wg.tensor(np.zeros((0, 3), np.float32), device=device).shape == (0, 3)
    assert wg.tensor(np.zeros((0, 3), np.uint8), device=device).numpy().shape == (0, 3)
    assert wg.arange(0, device=device).shape == (0,)
    assert wg.cat([e, wg.ones(2, 3, device=device)]).shape == (2, 3)
    x = wg.zeros(0, 3, device=device, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.shape == (0, 3)


# ---- errors that name the problem ----
def test_device_mismatch_names_both_devices():
    a, b = wg.tensor([1.0, 2.0], device="cpu"), wg.tensor([1.0, 2.0], device="webgpu")
    for fn in (lambda: a + b, lambda: b * a, lambda: wg.where(a > 0, a, b), lambda: a.reshape(1, 2) @ b.reshape(2, 1),
               lambda: wg.cat([a, b]), lambda: a.maximum(b)):
        with pytest.raises(RuntimeError) as info:
            fn()
        assert "cpu" in str(info.value) and "webgpu" in str(info.value), tag(str(info.value))


def test_shape_mismatch_errors(device):
    a = wg_tensor(randn(2, 3), device)
    with pytest.raises(RuntimeError, match="broadcast"):
        a + wg_tensor(randn(3, 2), device)
    with pytest.raises(RuntimeError):
        a @ wg_tensor(randn(2, 3), device)
    with pytest.raises(RuntimeError):
        wg.cat([a, wg_tensor(randn(3, 2), device)], 0)


def test_bad_dims_raise_index_error(device):
    a = wg_tensor(randn(2, 3), device)
    for fn in (lambda: a.sum(2), lambda: a.softmax(-3), lambda: a.transpose(0, 2), lambda: a.unsqueeze(3),
               lambda: a.squeeze(5), lambda: a.max(2), lambda: a.argmax(-3), lambda: wg.cat([a, a], 2),
               lambda: wg.stack([a, a], 4), lambda: a.gather(2, wg.zeros(2, 3, dtype=wg.int32, device=device)),
               lambda: a.index_select(2, wg.zeros(1, dtype=wg.int32, device=device)), lambda: a.size(2)):
        with pytest.raises(IndexError):
            fn()


def test_unknown_device_and_dtype(device):
    with pytest.raises(RuntimeError, match="device"):
        wg.tensor([1.0], device="tpu")
    with pytest.raises(TypeError):
        wg.zeros(2, dtype="bfloat16", device=device)
    assert wg.default_device() in ("cpu", "webgpu")
    assert wg.tensor([1.0]).device == wg.default_device()
