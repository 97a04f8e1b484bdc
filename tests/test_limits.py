"""Tensors at the adapter's limits, on webgpu against NumPy and the cpu device.

Past 65535 workgroups a dispatch's grid spills into y (shaders/common.wgsl, flat_id): every kernel
family is run here on a grid that spills (elementwise, reduce, gather and scatter, fold, pool,
optim, random). Tensors larger than a kernel can bind raise a RuntimeError before any GPU call. Loops are
bounded too: lavapipe silently ends a shader loop after 65535 iterations, so long reductions and
long scatter indices are split (checked with sizes past that).
"""
import gc
import math

import numpy as np
import pytest

import webgrad as wg
from webgrad.backends.webgpu.kernels.gather import SCATTER_SPAN
from webgrad.backends.webgpu.kernels.reduce import REDUCE_SPAN
from conftest import randn, rng, seed, tag

GPU = "webgpu"


@pytest.fixture(scope="module")
def runtime():
    return wg.get_backend(GPU).runtime


@pytest.fixture(scope="module")
def spill(runtime):
    """Elements past which a 256-wide kernel's grid spills into y, and a size just over it."""
    first = runtime.limits["max_compute_workgroups_per_dimension"] * 256
    return first, first + int(rng().integers(1, 50_000))


@pytest.fixture(scope="module")
def big(spill):
    """One random vector past the grid, on the host and on the GPU (uploading is slow on lavapipe,
    so the tests share it and do not change it)."""
    a = randn(spill[1])
    return a, gpu(a)


def gpu(a):
    return wg.tensor(a, device=GPU)


def test_elementwise_and_broadcasting_past_the_grid(big):
    a, x = big
    np.testing.assert_allclose((x * 3 + 1).numpy(), a * 3 + 1, rtol=1e-6, atol=1e-6, err_msg=tag("x * 3 + 1"))
    cols = 7
    rows = len(a) // cols
    row = randn(cols)
    got = (x[:rows * cols].reshape(rows, cols) - gpu(row)).numpy()   # a stride-0 operand: the strided path
    np.testing.assert_array_equal(got, a[:rows * cols].reshape(rows, cols) - row, err_msg=tag("(rows, 7) - (7,)"))


def test_full_reductions_of_millions(big):
    # one output over n elements: many chunks, then a second pass over their results
    a, x = big
    exact = a.astype(np.float64)
    assert abs(x.sum().item() - exact.sum()) <= 1e-6 * np.abs(exact).sum(), tag("sum")
    assert x.amax().item() == a.max(), tag("amax")
    assert x.argmin().item() == a.argmin(), tag("argmin")


def test_argmax_ties_across_chunks():
    # the lowest index wins a tie, also when the tied maxima sit in different chunks
    n = 3 * REDUCE_SPAN + 11
    a = rng().uniform(-1, 0, n).astype(np.float32)
    hits = np.sort(rng().choice(n, 4, replace=False))
    a[hits] = 2.0
    assert gpu(a).argmax().item() == hits[0], tag(f"maxima at {hits}")
    two = np.stack([a, a[::-1].copy()])
    np.testing.assert_array_equal(gpu(two).argmax(1).numpy(), two.argmax(1), err_msg=tag())
    ints = rng().integers(-1000, 1000, n).astype(np.int32)
    assert wg.tensor(ints, device=GPU).sum().item() == int(ints.astype(np.int64).sum()), tag("int sum")


def _layout(a, layout):
    """a on the GPU as a contiguous tensor, a transposed view of column-major storage, or every
    other column of a wider tensor; returns (numpy values, tensor)."""
    if layout == "columns":
        return a, gpu(np.ascontiguousarray(a.T)).T
    if layout == "strided":
        wide = randn(a.shape[0], 2 * a.shape[1])
        return wide[:, ::2], gpu(wide)[:, ::2]
    return a, gpu(a)


@pytest.mark.parametrize("layout", ["rows", "columns", "strided"])
def test_per_dim_reductions(layout):
    # many outputs (a grid past 65535 workgroups), and few outputs over a long dim (chunked)
    many, long = 65535 + int(rng().integers(1, 5000)), 2 * REDUCE_SPAN + int(rng().integers(1, 5000))
    a, x = _layout(randn(many, 5), layout)
    b, y = _layout(randn(3, long), layout)
    np.testing.assert_allclose(x.sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5, err_msg=tag("sum(1), many rows"))
    np.testing.assert_array_equal(x.argmax(1).numpy(), a.argmax(1), err_msg=tag("argmax(1), many rows"))
    np.testing.assert_allclose(y.sum(1).numpy(), b.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3,
                               err_msg=tag("sum(1), long rows"))
    np.testing.assert_array_equal(y.amin(1).numpy(), b.min(1), err_msg=tag("amin(1), long rows"))
    np.testing.assert_array_equal(y.argmin(1).numpy(), b.argmin(1), err_msg=tag("argmin(1), long rows"))
    np.testing.assert_allclose(y.var(0).numpy(), b.var(0, ddof=1), rtol=1e-4, atol=1e-5, err_msg=tag("var(0)"))


def test_softmax_many_rows():
    rows = 65535 + int(rng().integers(1, 5000))
    a = randn(rows, 10) * 4
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(wg.softmax(gpu(a), 1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6,
                               err_msg=tag("softmax"))


def test_matmul_tall_and_skinny():
    m = 200_000 + int(rng().integers(1, 1000))
    a, b = randn(m, 16), randn(16, 3)
    np.testing.assert_allclose((gpu(a) @ gpu(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5, err_msg=tag("(m, 16) @ (16, 3)"))


def test_index_select_and_cat_past_the_grid(big):
    a, x = big
    rows = 1000
    table = randn(rows, 4)
    idx = rng().integers(-rows, rows, len(a) // 4 + 1).astype(np.int32)   # negative ones count from the end
    got = wg.index_select(gpu(table), 0, wg.tensor(idx, device=GPU)).numpy()
    np.testing.assert_array_equal(got, table[idx], err_msg=tag("index_select"))
    tail = randn(int(rng().integers(1, 1000)))
    np.testing.assert_array_equal(wg.cat([gpu(tail), x]).numpy(), np.concatenate([tail, a]), err_msg=tag("cat"))


def test_scatter_add_of_a_long_index():
    # index_select's backward sums each row's uses; an index longer than one dispatch's span
    rows = 50
    n = 3 * SCATTER_SPAN + int(rng().integers(1, 1000))
    idx = rng().integers(0, rows, n).astype(np.int32)
    upstream = randn(n, 3)
    x = wg.zeros(rows, 3, device=GPU, requires_grad=True)
    (wg.index_select(x, 0, wg.tensor(idx, device=GPU)) * gpu(upstream)).sum().backward()
    want = np.zeros((rows, 3))
    np.add.at(want, idx, upstream.astype(np.float64))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-4, err_msg=tag("index_select backward"))


def test_fold_past_the_grid(spill):
    # fold (convolution's and pooling's backward) of non-overlapping 2x2 windows
    first, _ = spill
    side = math.isqrt(first) + 2 - math.isqrt(first) % 2
    half = side // 2
    g = randn(1, 1, 2, 2, half, half)
    backend = wg.get_backend(GPU)
    storage = backend.fold(gpu(g)._view, (1, 1, side, side), (2, 2), (2, 2), (1, 1))
    got = wg.Tensor(storage, (1, 1, side, side), wg.float32, GPU).numpy()
    want = g.transpose(0, 1, 4, 2, 5, 3).reshape(1, 1, side, side)   # out[2y + ky, 2x + kx] = g[ky, kx, y, x]
    assert side * side > first
    np.testing.assert_array_equal(got, want, err_msg=tag("fold"))


def test_max_pool2d_past_the_grid(big):
    # a column of n pixels in windows of 2 rows, one of them padding at each end: n + 1 outputs, so
    # both the forward (a thread per output) and the backward (a thread per pixel) spill
    a, x = big
    column = x.reshape(1, 1, len(a), 1).requires_grad_()
    out, at = wg.nn.functional.max_pool2d(column, (2, 1), stride=1, padding=(1, 0), return_indices=True)
    padded = np.concatenate([[-np.inf], a, [-np.inf]]).astype(np.float32)
    first = padded[:-1] >= padded[1:]   # the upper row wins a tie
    np.testing.assert_array_equal(out.detach().numpy().ravel(), np.maximum(padded[:-1], padded[1:]),
                                  err_msg=tag("values"))
    picked = np.arange(len(a) + 1) - first
    np.testing.assert_array_equal(at.numpy().ravel(), picked, err_msg=tag("indices"))
    out.sum().backward()
    np.testing.assert_array_equal(column.grad.numpy().ravel(), np.bincount(picked, minlength=len(a)),
                                  err_msg=tag("gradient"))


def test_adam_step_past_the_grid(big):
    w, param = big
    param = param.clone().requires_grad_()
    g = randn(len(w))
    param.grad = gpu(g)
    wg.optim.Adam([param], lr=0.01, weight_decay=0.1).step()
    reference = wg.tensor(w, device="cpu", requires_grad=True)
    reference.grad = wg.tensor(g, device="cpu")
    wg.optim.Adam([reference], lr=0.01, weight_decay=0.1).step()
    np.testing.assert_allclose(param.detach().numpy(), reference.detach().numpy(), rtol=1e-6, atol=1e-7,
                               err_msg=tag("Adam step"))


@pytest.mark.parametrize("normal", [False, True])
def test_random_past_the_grid_matches_cpu(spill, normal):
    _, n = spill
    make = wg.randn if normal else wg.rand
    numbers = {}
    for device in ("cpu", GPU):
        wg.manual_seed(seed())
        make(1000, device=device)        # a draw before: the generator's offset is not 0
        numbers[device] = make(n, device=device).numpy()
    # the same numbers: randn's log and cos differ in the last bits between NumPy and the GPU
    # (a wrong element index would give unrelated numbers)
    np.testing.assert_allclose(numbers[GPU], numbers["cpu"], rtol=1e-4 if normal else 0, atol=2e-4 if normal else 0,
                               err_msg=tag("randn" if normal else "rand"))


# ---- too large to bind: a clear error before any GPU call ----
class _Counting:
    """A driver stand-in that counts the calls reaching the real one."""

    def __init__(self, driver):
        self._driver, self.calls = driver, 0

    def __getattr__(self, name):
        attr = getattr(self._driver, name)
        if not callable(attr):
            return attr

        def counted(*args, **kwargs):
            self.calls += 1
            return attr(*args, **kwargs)
        return counted


@pytest.fixture
def counted(runtime, monkeypatch):
    runtime.flush()
    driver = _Counting(runtime.driver)
    monkeypatch.setattr(runtime, "driver", driver)
    return driver


def _too_large(match_shape, fn, driver, runtime):
    before = runtime.memory_stats()
    with pytest.raises(RuntimeError) as info:
        fn()
    message = str(info.value)
    assert match_shape in message and str(runtime.max_tensor_bytes) in message, tag(message)
    assert "maxStorageBufferBindingSize" in message, tag(message)
    runtime.flush()   # whatever was queued before the error is still fine to run
    assert driver.calls == 0, tag(f"{driver.calls} driver calls for a tensor that cannot exist")
    assert runtime.memory_stats()["live_bytes"] == before["live_bytes"], tag("a buffer leaked")


def test_too_large_for_the_adapter_raises_first(runtime, counted):
    limit = runtime.max_tensor_bytes
    elements = limit // 4 + 1
    _too_large(f"shape ({elements},)", lambda: wg.zeros(elements, device=GPU), counted, runtime)
    rows = int(rng().integers(2, 9))
    cols = -(-elements // rows)
    _too_large(f"shape ({rows}, {cols})", lambda: wg.full((rows, cols), 1.5, device=GPU), counted, runtime)
    _too_large(f"shape ({rows}, {cols})", lambda: wg.randn(rows, cols, device=GPU), counted, runtime)
    # the positions' count is known before they are listed: a triangle too large raises at once
    side = int(rng().integers(70_000, 100_000))
    _too_large(f"shape (2, {side * (side + 1) // 2})", lambda: wg.tril_indices(side, side, device=GPU), counted, runtime)


def test_too_large_under_a_lowered_limit(runtime, counted, monkeypatch):
    # a small limit stands for a big tensor: ops whose result would not fit raise, before any GPU
    # call, while their inputs fit; the device goes on working
    limit = 1 << 20
    n = int(rng().integers(300, 400))
    a, b = randn(n, n), randn(n, 1)
    x, y = gpu(a), gpu(b)
    m = limit // 4 // n + 1                    # (n, m) floats are just over the limit
    row = gpu(randn(1, m))
    column = gpu(randn(512 + int(rng().integers(1, 100)), 1))
    runtime.flush()
    counted.calls = 0
    monkeypatch.setattr(runtime, "max_tensor_bytes", limit)
    k = -(-m // n)
    cases = [
        (f"shape ({n}, {m})", lambda: y * row),                                   # broadcasting
        (f"shape ({n * k * n},)", lambda: wg.cat([x] * k, 1)),   # (cat asks for a flat buffer)
        (f"shape {(column.shape[0],) * 2}", lambda: column @ column.T),           # an outer product
        (f"shape ({n}, {n}, {k})", lambda: x.reshape(n, n, 1).expand(n, n, k) + 1),
    ]
    for shape, fn in cases:
        _too_large(shape, fn, counted, runtime)
    monkeypatch.undo()
    np.testing.assert_allclose((x @ x + y).numpy(), a @ a + b, rtol=1e-4, atol=1e-4, err_msg=tag("after the errors"))


def test_sizes_past_32_bits_raise_plainly(runtime, counted):
    """Shapes of more than 2**32 elements: a result raises the too-large error (not a packing error from
    a kernel's 32-bit words), and work over a view that big (a reduction of an expanded row) says
    that WebGPU kernels count in 32 bits; no GPU call either way."""
    rows = int(rng().integers(70_000, 100_000))
    row = gpu(randn(1, rows))
    column = gpu(randn(rows, 1))
    gc.collect()   # earlier tests' tensors in cycles, which a collection mid-case would free
    runtime.flush()
    counted.calls = 0
    for fn in (lambda: wg.zeros((rows, rows), device=GPU), lambda: column + row, lambda: column @ row):
        _too_large(f"shape ({rows}, {rows})", fn, counted, runtime)
    before = runtime.memory_stats()["live_bytes"]
    with pytest.raises(RuntimeError, match="does not fit 32 bits") as info:
        row.expand(rows, rows).sum()
    assert "cpu device" in str(info.value), tag(str(info.value))
    del info   # (its traceback holds the frames' buffers)
    runtime.flush()
    assert runtime.memory_stats()["live_bytes"] == before, tag("a buffer leaked")
    np.testing.assert_allclose(row.sum().item(), row.numpy().sum(dtype=np.float64), rtol=1e-4, err_msg=tag("after"))
