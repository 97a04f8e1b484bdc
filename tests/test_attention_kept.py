"""F.scaled_dot_product_attention through its weights kept (a GPU's way within a memory budget: batched
products around shaders/attention.wgsl's weights entries), forced on this adapter, against torch:
masks, layouts, grouped heads, empty sides, MultiheadAttention, the dispatches, and where it is chosen
(a GPU, while wg.jit records, within the budget).
tests/test_attention.py checks the fused kernels the same way."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import test_attention as base
import webgrad as wg
import webgrad.nn.functional as F
from webgrad.backends.webgpu.kernels import attention as attention_kernels
from webgrad.ops import attention as attention_op
from conftest import assert_close, check_op, dispatched_kernels, randn, rng, tag, wg_tensor


@pytest.fixture
def kept(monkeypatch):
    """Attention through its kept weights (a GPU's way within its budget) on this adapter too."""
    monkeypatch.setattr(attention_op, "KEEP_WEIGHTS", True)


@pytest.mark.parametrize("batch,L,S,E,Ev", base.SHAPES[:4], ids=lambda v: str(v))
@pytest.mark.parametrize("mask", ["causal", "bool", "float", "none"])
def test_sdpa_kept_weights(batch, L, S, E, Ev, mask, kept):
    """The weights kept (products, the weights kernel, the backward's products) against torch: masks
    with rows that attend nothing, -inf in float masks, E != Ev."""
    inputs = [randn(*batch, L, E), randn(*batch, S, E), randn(*batch, S, Ev)]
    if mask == "bool":
        inputs.append(rng().random((L, S)) < 0.7)
        inputs[-1][0] = False   # query 0 attends nothing
    elif mask == "float":
        inputs.append(np.where(rng().random((L, S)) < 0.2, -np.inf, 2 * randn(L, S)).astype(np.float32))
    kwargs = {"is_causal": mask == "causal", "scale": 0.3 if mask == "none" else None}
    check_op(base._sdpa(F, **kwargs), *inputs, device="webgpu", torch_fn=base._sdpa(TF, **kwargs), grad=[0, 1, 2], fd=False)


@pytest.mark.parametrize("L,S", [(9, 300), (5, 1100)], ids=str)
@pytest.mark.parametrize("mask", ["causal", "bool"])
def test_sdpa_kept_weights_long_rows(L, S, mask, kept):
    """Rows past 16 lanes of 16 keys: more lanes a query (32 and 128), each key in a register."""
    inputs = [randn(2, L, 16), randn(2, S, 16), randn(2, S, 8)]
    if mask == "bool":
        inputs.append(rng().random((L, S)) < 0.3)
    kwargs = {"is_causal": mask == "causal"}
    check_op(base._sdpa(F, **kwargs), *inputs, device="webgpu", torch_fn=base._sdpa(TF, **kwargs), grad=[0, 1, 2], fd=False)


def test_sdpa_kept_weights_layouts(kept, monkeypatch):
    """Strided and broadcast inputs, the GPT's views (out in torch's layout), grouped heads, large
    scores, no queries or keys, MultiheadAttention; and the choice: on a GPU alone, within the budget."""
    base.test_sdpa_layouts("webgpu")
    base.test_sdpa_other_layouts("webgpu")
    base.test_sdpa_gpt_views(2, 40, "webgpu")
    base.test_sdpa_large_scores_are_stable("webgpu")
    base.test_sdpa_empty(0, 5, "webgpu")
    base.test_sdpa_empty(3, 0, "webgpu")
    base.test_multihead_attention_self_unbatched_causal("webgpu")
    backend = wg.get_backend("webgpu")
    keys = attention_kernels.KEPT_MIN_KEYS
    monkeypatch.setattr(backend, "is_software", True)   # (this adapter may be either)
    assert not backend.attention_keeps_weights(1, 16, keys), "a software adapter keeps the fused kernels"
    monkeypatch.setattr(backend, "is_software", False)
    rows = min(attention_kernels.KEPT_WEIGHTS_BYTES, backend.runtime.max_tensor_bytes) // (4 * keys)
    assert backend.attention_keeps_weights(1, rows, keys) and backend.attention_keeps_weights(rows, 1, keys)
    assert not backend.attention_keeps_weights(1, rows + 1, keys), "past the budget"
    assert not backend.attention_keeps_weights(1, 16, keys - 1), "under the shortest"
    longest = attention_kernels.KEPT_MAX_KEYS
    assert backend.attention_keeps_weights(1, 1, longest), "the longest rows held in registers"
    assert not backend.attention_keeps_weights(1, 1, longest + 1), "past the longest"


def test_sdpa_kept_weights_dispatches(kept, monkeypatch):
    """Kept weights: forward q k^T, the weights (scale, mask and softmax in place), P v; backward
    dout v^T, the scores' gradient in place, then dq, dk and dv: no other pass over the weights."""
    q, k, v = (wg_tensor(randn(2, 3, n, 32), "webgpu", requires_grad=True) for n in (21, 30, 30))
    mask = wg_tensor(rng().random((21, 30)) < 0.8, "webgpu")
    kernels = dispatched_kernels(monkeypatch)
    out = F.scaled_dot_product_attention(q, k, v, mask)
    assert len(kernels) == 3, tag(f"forward took {len(kernels)} dispatches")
    out.backward(wg_tensor(randn(2, 3, 21, 32), "webgpu"))
    assert len(kernels) == 3 + 5, tag(f"backward took {len(kernels) - 3} dispatches")


@pytest.mark.parametrize("triangle", ["out_tril", "a_tril", "a_triu"])
@pytest.mark.parametrize("kernel", ["tiled", "tiled, K in pieces", "unstaged", "cpu"])
@pytest.mark.parametrize("layout", ["a", "a.mT"])
def test_causal_products_equal_the_dense_where_read(triangle, kernel, layout, monkeypatch):
    """The products causal attention leaves work out of (kernels/matmul.py's TRIANGLES), through the
    tiled kernel with small tiles (many along the diagonal), K in pieces, the unstaged kernel and the
    cpu device, A contiguous along K or M (read as vec4s either way where its sizes are multiples of 4):
    a result's lower triangle, and whole results of operands zero above (a_tril) or below (a_triu)
    their diagonals, equal to the dense product."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    device = "cpu" if kernel == "cpu" else "webgpu"
    if kernel != "cpu":
        tiles = matmul_kernels.MatmulTiles(4, 4, 4, 4, 1 if kernel == "unstaged" else 8)
        monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: tiles)
        monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
        monkeypatch.setattr(matmul_kernels, "matmul_splits", lambda *_: 3 if kernel.endswith("pieces") else 1)
    generator = rng()
    rows, cols, inner = (int(v) * (4 if generator.random() < 0.5 else 1) for v in generator.integers(6, 18, size=3))
    if triangle == "out_tril":
        a, b = randn(2, rows, inner), randn(2, inner, cols)
        read = np.tril(np.ones((rows, cols), bool))
    else:
        a, b = randn(2, rows, cols), randn(2, cols, inner)
        a *= (np.tril if triangle == "a_tril" else np.triu)(np.ones((rows, cols), np.float32))
        read = np.ones((rows, inner), bool)
    backend = wg.get_backend(device)
    x = wg_tensor(a, device) if layout == "a" else wg_tensor(a.transpose(0, 2, 1).copy(), device).mT
    y = wg_tensor(b, device)
    storage = backend.matmul(x._view, y._view, triangle=triangle)
    out = wg.Tensor(storage, (2, rows, b.shape[-1]), x.dtype, x.device).numpy()
    expected = a.astype(np.float64) @ b
    np.testing.assert_allclose(out[:, read], expected[:, read], atol=1e-4, rtol=1e-4,
                               err_msg=f"{kernel}, {layout}: rows {rows} cols {cols} inner {inner}")


def test_sdpa_kept_weights_causal_through_tiles(kept, monkeypatch):
    """Causal attention's six products through the tiled kernel (small tiles, many along the diagonal),
    forward and backward, against torch."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    monkeypatch.setattr(matmul_kernels, "matmul_tiles", lambda *_: matmul_kernels.MatmulTiles(4, 4, 4, 4, 8))
    monkeypatch.setattr(matmul_kernels, "MATMUL_SMALL_MACS", 0)
    inputs = [randn(2, 2, 45, 24), randn(2, 2, 38, 24), randn(2, 2, 38, 20)]
    check_op(base._sdpa(F, is_causal=True), *inputs, device="webgpu", torch_fn=base._sdpa(TF, is_causal=True),
             grad=[0, 1, 2], fd=False)


def test_sdpa_kept_weights_gpt_views_copy_nothing(kept, monkeypatch):
    """Kept weights, the GPT's views of one (B, T, 3C) projection: forward its three dispatches (P v
    written in torch's layout, so the transpose back is a view), backward its five (dq, dk and dv
    written where the projection's gradient holds them, so split's backward concatenates nothing);
    values and the projection's gradient as torch's."""
    heads, head = 3, 16
    x, grad = randn(2, 19, 3 * heads * head), randn(2, 19, heads * head)
    wx = wg_tensor(x, "webgpu", requires_grad=True)
    kernels = dispatched_kernels(monkeypatch)
    y = F.scaled_dot_product_attention(*base._gpt_heads(wx, heads), is_causal=True)
    y = y.transpose(1, 2).contiguous().view(2, 19, heads * head)
    assert len(kernels) == 3, tag(f"forward took {len(kernels)} dispatches")
    y.backward(wg_tensor(grad, "webgpu"))
    assert len(kernels) == 3 + 5, tag(f"backward took {len(kernels) - 3} dispatches")
    tx = torch.tensor(x, requires_grad=True)
    ty = TF.scaled_dot_product_attention(*base._gpt_heads(tx, heads), is_causal=True)
    ty.transpose(1, 2).contiguous().view(2, 19, heads * head).backward(torch.tensor(grad))
    assert_close(y.detach().numpy(), ty.transpose(1, 2).reshape(2, 19, -1).detach().numpy())
    assert_close(wx.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("layout", ["one tensor thrice", "overlapping windows", "interleaved heads"])
def test_sdpa_kept_weights_views_of_one_storage(layout, kept):
    """q, k and v as views of one storage that share elements (self-attention on one tensor, windows
    that overlap) or interleave without sharing: each gradient is right, summed where they share."""
    def views(x):
        if layout == "one tensor thrice":
            return x, x, x
        if layout == "overlapping windows":
            return x[:, :, 0:12], x[:, :, 4:16], x[:, :, 8:20]
        return x[..., 0::3], x[..., 1::3], x[..., 2::3]   # (a head's features interleaved: runs of 1)
    x = randn(2, 3, 20, 48)
    check_op(lambda x: F.scaled_dot_product_attention(*views(x), is_causal=True), x, device="webgpu",
             torch_fn=lambda x: TF.scaled_dot_product_attention(*views(x), is_causal=True), fd=False)


def test_disjoint_views_against_their_elements():
    """attention's _disjoint_views says views of one storage share no element only where listing
    their elements agrees (random shapes, strides and offsets), and finds the GPT's q, k and v so."""
    from webgrad.backends.base import View
    generator = rng()
    found = 0
    for _ in range(2000):
        ndim = int(generator.integers(1, 4))
        shape = tuple(int(v) for v in generator.integers(1, 5, size=ndim))
        strides = [int(v) for v in generator.integers(0, 13, size=ndim)]
        if generator.random() < 0.5:   # a contiguous run innermost, as most views have
            strides[-1] = 1
        strides = tuple(strides)
        offsets = [int(v) for v in generator.integers(0, 40, size=3)]
        storage = np.zeros(200, np.float32)
        tensors = [wg.Tensor(storage, shape, wg.float32, "cpu", strides, at) for at in offsets]
        lists = [View(storage, shape, strides, at, wg.float32).positions() for at in offsets]
        elements = [p for positions in lists for p in positions]
        if attention_op._disjoint_views(tensors):
            found += 1
            assert len(set(elements)) == len(elements), tag(f"shape {shape} strides {strides} offsets {offsets}")
    assert found, "no random layout was found disjoint"
    batch, time, heads, head = 2, 5, 3, 4
    projection = wg_tensor(randn(batch, time, 3 * heads * head), "cpu")
    assert attention_op._disjoint_views(base._gpt_heads(projection, heads))
