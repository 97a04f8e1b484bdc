"""The matmul family's unstaged kernel (shaders/matmul_small.wgsl): on a software adapter, products
of at most MATMUL_SMALL_MACS multiply-adds take it at 4x4 outputs a thread, in every layout through one
pipeline, with torch's results for odd shapes, strided and transposed operands, batches, biases,
empty and split K, epilogues; larger products take it with 8x8 outputs a thread, a convolution's too."""
import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn
from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
from webgrad.backends.webgpu.kernels import matmul_tuning
from webgrad.backends.webgpu.kernels.epilogue import StoreEpilogue
from webgrad.ops.matmul import matmul_with_bias
from conftest import assert_close, check_op, randn, rng, wg_tensor


@pytest.fixture
def plans(monkeypatch):
    """The (tiles, kernel key, splits) of each product planned while the test runs, on a software
    adapter whatever this machine's is."""
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", True)
    seen, plan = [], matmul_kernels._plan

    def recording_plan(*args):
        key, words, grid, splits = plan(*args)
        seen.append((args[7], key, splits))
        return key, words, grid, splits
    monkeypatch.setattr(matmul_kernels, "_plan", recording_plan)
    return seen


def _sizes(count, high=12):
    return [int(v) for v in rng().integers(1, high, count)]


def _layouts(high=6):
    """name -> (shape of a, shape of b, the product of the tensors made from them), odd sizes."""
    m, k, n, batch = *_sizes(3, high), _sizes(1, 6)[0]
    return {
        "a @ b": ((m, k), (k, n), lambda a, b: a @ b),
        "a.T @ b": ((k, m), (k, n), lambda a, b: a.T @ b),
        "a @ b.T": ((m, k), (n, k), lambda a, b: a @ b.T),
        "a.T @ b.T": ((k, m), (n, k), lambda a, b: a.T @ b.T),
        "sliced": ((2 * m + 1, k + 3), (k, 2 * n), lambda a, b: a[1::2, 3:] @ b[:, ::2]),
        "batched": ((batch, m, k), (batch, k, n), lambda a, b: a @ b),
        "broadcast batch": ((2, 1, m, k), (batch, k, n), lambda a, b: a @ b),
        "permuted batch": ((m, batch, k), (batch, n, k), lambda a, b: a.permute(1, 0, 2) @ b.mT),
        "expanded": ((1, m, k), (batch, k, n), lambda a, b: a.expand(batch, m, k) @ b),
        "vector @ matrix": ((k,), (k, n), lambda a, b: a @ b),
        "matrix @ vector": ((m, k), (k,), lambda a, b: a @ b),
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_small_products_match_torch_in_every_layout(name, plans):
    sa, sb, fn = _layouts()[name]
    check_op(fn, randn(*sa), randn(*sb), device="webgpu")   # the product and its gradients' products
    assert plans and all(tiles == matmul_kernels.MATMUL_SMALL for tiles, _, _ in plans), plans


def test_one_pipeline_serves_every_layout(plans):
    """The staging orders and vec4 reads that make the tiled kernel's variants do not matter here."""
    for sa, sb, fn in _layouts().values():
        fn(wg_tensor(randn(*sa), "webgpu"), wg_tensor(randn(*sb), "webgpu")).numpy()
    assert len({key for _, key, _ in plans}) == 1, {key for _, key, _ in plans}


@pytest.mark.parametrize("bias_dim", [-1, -2])
def test_small_products_with_a_bias_of_rows_or_columns(bias_dim, plans):
    batch, m, k, n = _sizes(4)
    a, b, bias = randn(batch, m, k), randn(k, n), randn(n if bias_dim == -1 else m)
    x, z = wg_tensor(a, "webgpu", requires_grad=True), wg_tensor(bias, "webgpu", requires_grad=True)
    y = wg_tensor(b.T.copy(), "webgpu", requires_grad=True)   # b read through a transposed view
    tx, tz, ty = (torch.from_numpy(t).requires_grad_() for t in (a, bias, b.T.copy()))
    out = matmul_with_bias(x, y.T, z, bias_dim)
    expected = tx @ ty.T + (tz if bias_dim == -1 else tz[:, None])
    assert_close(out.detach().numpy(), expected.detach().numpy())
    g = randn(batch, m, n)
    out.backward(wg_tensor(g, "webgpu"))
    expected.backward(torch.from_numpy(g))
    for ours, theirs in ((x, tx), (y, ty), (z, tz)):
        assert_close(ours.grad.numpy(), theirs.grad.numpy())
    assert plans[0][0] == matmul_kernels.MATMUL_SMALL and plans[0][1][5] == ("col", "row")[bias_dim == -2]


def test_small_products_of_an_empty_or_long_inner_dimension(plans):
    """K = 0 gives zeros (and the bias); a K past SOFTWARE_MATMUL_K is split, the bias in one piece."""
    m, n = _sizes(1, 3)[0], _sizes(1, 4)[0]   # m * n * 40,000 within MATMUL_SMALL_MACS
    for k, bias_dim in [(0, -1), (0, None), (40_000, -2), (40_000, None)]:
        a, b, bias = randn(m, k), randn(k, n), randn(m if bias_dim == -2 else n)
        x, y = wg_tensor(a, "webgpu"), wg_tensor(b, "webgpu")
        out = x @ y if bias_dim is None else matmul_with_bias(x, y, wg_tensor(bias, "webgpu"), bias_dim)
        expected = a.astype(np.float64) @ b + (0 if bias_dim is None else bias if bias_dim == -1 else bias[:, None])
        assert_close(out.numpy(), expected, atol=2e-3, what=f"k={k}, bias along {bias_dim}")
    assert [(tiles == matmul_kernels.MATMUL_SMALL, splits) for tiles, _, splits in plans] == [(True, 3)] * 2


def test_a_small_product_takes_its_epilogue_under_jit(plans):
    """wg.jit's fusion puts a Linear's activation into the small kernel's store, as into a tiled one's."""
    layer = nn.Linear(*_sizes(2), device="webgpu")

    def forward(x):
        with wg.no_grad():
            return layer(x).tanh() * 2.0
    fn = wg.jit(forward)
    rows = int(rng().integers(1, 30))
    inputs = [randn(rows, layer.in_features) for _ in range(3)]
    results = [fn(wg_tensor(x, "webgpu")).numpy() for x in inputs]   # eager, recorded, replayed
    w, b = (torch.from_numpy(t.detach().numpy()) for t in (layer.weight, layer.bias))
    for x, ours in zip(inputs, results):
        assert_close(ours, ((torch.from_numpy(x) @ w.T + b).tanh() * 2.0).numpy(), atol=1e-5, rtol=1e-5)
    keys = {pipeline: key for key, pipeline in wg.get_backend("webgpu").runtime._pipelines.items()}
    (program,) = fn._programs.values()
    [(pipeline, _, _)] = program.recording.dispatches   # one kernel: the product, tanh and * 2.0
    key = keys[pipeline]
    assert key[1] == matmul_kernels.MATMUL_SMALL and isinstance(key[-1], StoreEpilogue), key


def test_larger_products_and_gpu_adapters_keep_the_tiles(plans, monkeypatch):
    side = int(round(matmul_kernels.MATMUL_SMALL_MACS ** (1 / 3))) + 1   # just past the bound
    a, b = randn(side, side), randn(side, side)
    assert_close((wg_tensor(a, "webgpu") @ wg_tensor(b, "webgpu")).numpy(), a.astype(np.float64) @ b)
    monkeypatch.setattr(wg.get_backend("webgpu"), "is_software", False)
    (wg_tensor(a[:3, :3], "webgpu") @ wg_tensor(b[:3, :3], "webgpu")).numpy()
    assert [tiles == matmul_kernels.MATMUL_SMALL for tiles, _, _ in plans] == [False, False]


def test_small_convolutions_read_windows_in_the_same_kernel(plans):
    """A convolution's products (its input windows as B, K made of two dims as A) take the small
    kernel too: forward with a bias along rows, and both gradients, against torch."""
    n, c, co = _sizes(3, 4)
    x, w, b = randn(n, c, 7, 6), randn(co, c, 3, 2), randn(co)
    check_op(lambda x, w, b: wg.nn.functional.conv2d(x, w, b, stride=(2, 1), padding=1), x, w, b,
             device="webgpu", torch_fn=lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=(2, 1), padding=1))
    forms = {tuple(form if isinstance(form, str) else form[0] for form in key[1:3]) for _, key, _ in plans}
    assert {("strided", "window"), ("split_k", "window")} <= forms, forms
    assert all(tiles == matmul_kernels.MATMUL_SMALL for tiles, _, _ in plans), plans


@pytest.mark.parametrize("name", list(_layouts()))
def test_larger_strided_products_take_8x8_outputs_a_thread(name, plans, monkeypatch):
    """Past the bound (here 0), strided products take the kernel with 8x8 outputs a thread, a thread's
    rows of A and columns of B addressed before its loop (kernels/matmul_small.py): sizes that leave
    partial blocks at the edges, against torch, the gradients' products too."""
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
    sa, sb, fn = _layouts(high=90)[name]
    check_op(fn, randn(*sa), randn(*sb), device="webgpu")
    assert plans and all(not tiles.staged and tiles.tm * tiles.tn == 64 for tiles, _, _ in plans), plans


def test_unstaged_bias_of_rows_or_columns(plans, monkeypatch):
    """Past the bound (here 0), an unstaged product's bias along its rows or its columns."""
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
    for bias_dim in (-1, -2):
        m, k, n = _sizes(3, 90)
        a, b, bias = randn(m, k), randn(n, k), randn(n if bias_dim == -1 else m)
        out = matmul_with_bias(wg_tensor(a, "webgpu"), wg_tensor(b, "webgpu").T, wg_tensor(bias, "webgpu"), bias_dim)
        expected = a.astype(np.float64) @ b.T + (bias if bias_dim == -1 else bias[:, None])
        assert_close(out.numpy(), expected, atol=1e-4, rtol=1e-4, what=f"bias along {bias_dim}")
    assert plans and all(not tiles.staged and tiles.tm * tiles.tn == 64 for tiles, _, _ in plans), plans


@pytest.mark.parametrize("stride, dilation, piece", [(1, 1, 13), ((2, 1), (1, 2), 7)])
def test_larger_convolutions_read_windows_unstaged(stride, dilation, piece, plans, monkeypatch):
    """Past the bound (here 0), a convolution's products (its input's windows as B, a K of two dims as
    A) take the unstaged kernel at 8x8 outputs a thread too, K split in pieces so that the pieces'
    counters start inside a window's row and a K2 run and wrap more than once (kernels/matmul_small.py):
    forward with a bias, both gradients, odd sizes, padding, stride and dilation, against torch."""
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
    monkeypatch.setattr(matmul_tuning, "SOFTWARE_MATMUL_K", piece)
    n, c, co = (size + 2 for size in _sizes(3, 4))
    x, w, b = randn(n, c, *(size + 3 for size in _sizes(2, 10))), randn(co, c, 3, 2), randn(co)
    kwargs = dict(stride=stride, padding=(1, 2), dilation=dilation)
    check_op(lambda x, w, b: wg.nn.functional.conv2d(x, w, b, **kwargs), x, w, b, device="webgpu",
             torch_fn=lambda x, w, b: torch.nn.functional.conv2d(x, w, b, **kwargs))
    forms = {tuple(form if isinstance(form, str) else form[0] for form in key[1:3]) for _, key, _ in plans}
    assert {("strided", "window"), ("split_k", "window")} <= forms, forms
    assert all(not tiles.staged and tiles.tm * tiles.tn == 64 for tiles, _, _ in plans), plans
    assert any(splits > 1 for _, _, splits in plans), plans
