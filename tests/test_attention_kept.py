"""F.scaled_dot_product_attention through its weights kept (a GPU's way within a memory budget: batched
products around shaders/attention.wgsl's weights entries), forced on this adapter, against torch:
masks, layouts, grouped heads, empty sides, MultiheadAttention, the dispatches, and where it is chosen
(a GPU, while wg.jit records, within the budget).
tests/test_attention.py checks the fused kernels the same way."""
import numpy as np
import pytest
import torch.nn.functional as TF

import test_attention as base
import webgrad as wg
import webgrad.nn.functional as F
from webgrad.backends.webgpu.kernels import attention as attention_kernels
from webgrad.ops import attention as attention_op
from conftest import check_op, dispatched_kernels, randn, rng, tag, wg_tensor


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
    assert backend.is_software and not backend.attention_keeps_weights(1, 4, 4)
    monkeypatch.setattr(backend, "is_software", False)
    keys = attention_kernels.KEPT_MIN_KEYS
    rows = min(attention_kernels.KEPT_WEIGHTS_BYTES, backend.runtime.max_tensor_bytes) // (4 * keys)
    assert not backend.attention_keeps_weights(1, 16, keys), "eagerly"
    backend.runtime.start_recording()
    try:
        assert backend.attention_keeps_weights(1, rows, keys) and backend.attention_keeps_weights(rows, 1, keys)
        assert not backend.attention_keeps_weights(1, rows + 1, keys), "past the budget"
        assert not backend.attention_keeps_weights(1, 16, keys - 1), "under the shortest"
    finally:
        backend.runtime.stop_recording()


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
