"""F.scaled_dot_product_attention (the fused kernels: tiled, and a thread per row as software adapters run
them) and nn.MultiheadAttention against torch: values
and gradients over head sizes 16..128, sequence lengths that are not multiples of the kernel's tiles,
masks, causal, scale, GQA, broadcast and strided inputs; float64 finite differences on cpu; dropout
statistically; dispatch counts."""
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from webgrad.backends.webgpu.kernels import attention as attention_kernels
from webgrad.backends.webgpu.kernels.attention import (BLOCKINGS, OTHER_ROWS, SOFTWARE_BLOCKINGS, Blocking,
                                                       attention_tiles)
from conftest import assert_close, check_op, dispatched_kernels, randn, rng, tag, to_numpy, wg_tensor


def _sdpa(module, **kwargs):
    return lambda q, k, v, *mask: module.scaled_dot_product_attention(q, k, v, *mask, **kwargs)


# (batch dims, L, S, E, Ev): lengths around the kernel's blocks (32 rows and tiles of 32 up to 64
# dims; 64 rows, tiles of 16 past), heads that end mid-chunk, E != Ev
SHAPES = [((2, 3), 5, 7, 16, 16), ((1, 2), 37, 29, 24, 40), ((2,), 50, 17, 64, 64), ((1, 1), 20, 33, 128, 128),
          ((), 1, 1, 16, 8), ((3, 1), 16, 8, 32, 24), ((1,), 70, 20, 96, 116), ((2,), 33, 66, 20, 52)]


@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(batch, L, S, E, Ev, causal, device):
    inputs = [randn(*batch, L, E), randn(*batch, S, E), randn(*batch, S, Ev)]
    check_op(_sdpa(F, is_causal=causal), *inputs, device=device, torch_fn=_sdpa(TF, is_causal=causal),
             fd_points=6)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("mask_shape", [(19, 26), (2, 1, 19, 26), (1, 26), (3, 19, 1)])
def test_sdpa_masks(kind, mask_shape, device):
    """Masks broadcast as torch's; float masks with -inf entries; rows with every key masked give 0
    and no gradient."""
    if kind == "bool":
        mask = rng().random(mask_shape) < 0.7
        if mask_shape[-2] > 1:
            mask[..., 0, :] = False   # query 0 attends nothing
    else:
        mask = 2 * randn(*mask_shape)
        mask[rng().random(mask_shape) < 0.2] = -np.inf
    q, k, v = randn(2, 3, 19, 24), randn(2, 3, 26, 24), randn(2, 3, 26, 16)
    check_op(_sdpa(F, scale=0.3), q, k, v, mask, device=device, torch_fn=_sdpa(TF, scale=0.3), grad=[0, 1, 2],
             fd_points=6)


def test_sdpa_layouts(device):
    """Strided q, k, v (heads transposed out of (B, L, H, E), as MultiheadAttention makes them), a
    key broadcast over heads, 2-D inputs, and grouped-query heads (enable_gqa)."""
    def heads(q, k, v):   # (B, L, H, E) -> (B, H, L, E) views
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    check_op(lambda q, k, v: F.scaled_dot_product_attention(*heads(q, k, v)), randn(2, 11, 3, 16),
             randn(2, 9, 3, 16), randn(2, 9, 3, 16), device=device,
             torch_fn=lambda q, k, v: TF.scaled_dot_product_attention(*heads(q, k, v)), fd_points=6)
    check_op(_sdpa(F), randn(2, 3, 10, 16), randn(1, 1, 12, 16), randn(2, 1, 12, 16), device=device,
             torch_fn=_sdpa(TF), fd_points=6)

    def dims_last(q, k, v):   # (B, H, E, L) -> (B, H, L, E) views: the head's elements a row apart
        return q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2)
    check_op(lambda q, k, v: F.scaled_dot_product_attention(*dims_last(q, k, v), is_causal=True),
             randn(2, 2, 16, 11), randn(2, 2, 16, 11), randn(2, 2, 16, 11), device=device,
             torch_fn=lambda q, k, v: TF.scaled_dot_product_attention(*dims_last(q, k, v), is_causal=True),
             fd_points=6)
    check_op(_sdpa(F, is_causal=True), randn(9, 16), randn(9, 16), randn(9, 20), device=device,
             torch_fn=_sdpa(TF, is_causal=True), fd_points=6)
    check_op(_sdpa(F, enable_gqa=True), randn(2, 6, 10, 16), randn(2, 2, 13, 16), randn(2, 2, 13, 16),
             rng().random((6, 10, 13)) < 0.8, device=device, torch_fn=_sdpa(TF, enable_gqa=True), grad=[0, 1, 2],
             fd_points=6)


def _gpt_heads(x, heads):
    """nanoGPT's q, k, v: (B, H, T, hd) views of the (B, T, 3C) projection."""
    batch, time, channels = x.shape[0], x.shape[1], x.shape[2] // 3
    return [t.view(batch, time, heads, channels // heads).transpose(1, 2) for t in x.split(channels, dim=2)]


@pytest.mark.parametrize("heads,head", [(3, 16), (2, 40), (1, 128)])
def test_sdpa_gpt_views(heads, head, device):
    """The GPT's transposed views go in as they are; out comes back in torch's layout (a view of
    (B, T, H, hd)) and the way back, y.transpose(1, 2).contiguous().view(B, T, C), matches torch's,
    values and the projection's gradient."""
    x, grad = randn(2, 13, 3 * heads * head), randn(2, 13, heads * head)

    def step(module, x):
        y = module.nn.functional.scaled_dot_product_attention(*_gpt_heads(x, heads), is_causal=True)
        return y, y.transpose(1, 2).contiguous().view(x.shape[0], x.shape[1], -1)
    tx = torch.tensor(x, requires_grad=True)
    ty, tz = step(torch, tx)
    tz.backward(torch.tensor(grad))
    wx = wg_tensor(x, device, requires_grad=True)
    wy, wz = step(wg, wx)
    wz.backward(wg_tensor(grad, device))
    if device == "webgpu":
        assert wy.stride() == ty.stride(), tag(f"out's strides {wy.stride()}, torch's {ty.stride()}")
    assert_close(to_numpy(wz), tz.detach().numpy())
    assert_close(to_numpy(wx.grad), tx.grad.numpy())


def test_sdpa_gpt_views_copy_nothing(monkeypatch):
    """Around the kernels, the GPT's attention copies nothing: forward the attention kernel alone
    (the transpose back is a view), backward its three and one write per piece of the projection's
    gradient (split's backward)."""
    heads, head = 2, 16
    x = wg_tensor(randn(2, 9, 3 * heads * head), "webgpu", requires_grad=True)
    grad = wg_tensor(randn(2, 9, heads * head), "webgpu")
    kernels = dispatched_kernels(monkeypatch)
    y = F.scaled_dot_product_attention(*_gpt_heads(x, heads), is_causal=True)
    y = y.transpose(1, 2).contiguous().view(2, 9, heads * head)
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    y.backward(grad)
    assert len(kernels) == 1 + 3 + 3, tag(f"backward took {len(kernels) - 1} dispatches")


def test_sdpa_other_layouts(device):
    """Inputs in other dim orders (rows outermost, heads innermost but for the head's dims; a key
    broadcast over the batch): values and gradients as torch's, and out in torch's layout."""
    def rows_first(q, k, v):   # (L, B, H, E) -> (B, H, L, E) views
        return [t.permute(1, 2, 0, 3) for t in (q, k, v)]
    check_op(lambda q, k, v: F.scaled_dot_product_attention(*rows_first(q, k, v)), randn(11, 2, 3, 24),
             randn(7, 2, 3, 24), randn(7, 2, 3, 20), device=device,
             torch_fn=lambda q, k, v: TF.scaled_dot_product_attention(*rows_first(q, k, v)), fd_points=6)
    if device == "webgpu":   # (the numpy reference writes out contiguous)
        q, tq = wg_tensor(randn(11, 2, 3, 24), device).permute(1, 2, 0, 3), torch.zeros(11, 2, 3, 24).permute(1, 2, 0, 3)
        assert F.scaled_dot_product_attention(q, q, q).stride() == TF.scaled_dot_product_attention(tq, tq, tq).stride()
    check_op(lambda q, k, v: F.scaled_dot_product_attention(q, k.expand(3, 2, 9, 16), v.transpose(0, 1)),
             randn(3, 2, 5, 16), randn(1, 2, 9, 16), randn(2, 3, 9, 16), device=device,
             torch_fn=lambda q, k, v: TF.scaled_dot_product_attention(q, k.expand(3, 2, 9, 16), v.transpose(0, 1)),
             fd_points=6)


@pytest.mark.parametrize("L,S", [(0, 5), (3, 0)])
def test_sdpa_empty(L, S, device):
    """No queries, or no keys (every output 0, as torch)."""
    check_op(_sdpa(F), randn(2, L, 8), randn(2, S, 8), randn(2, S, 4), device=device, torch_fn=_sdpa(TF))


def test_sdpa_composed_paths(device):
    """Heads past the kernel's 128 and float masks that need their own gradient take the composed path."""
    check_op(_sdpa(F, is_causal=True), randn(1, 2, 6, 160), randn(1, 2, 6, 160), randn(1, 2, 6, 8), device=device,
             torch_fn=_sdpa(TF, is_causal=True), fd_points=4)
    check_op(_sdpa(F), randn(2, 5, 16), randn(2, 7, 16), randn(2, 7, 16), randn(5, 7), device=device,
             torch_fn=_sdpa(TF), fd_points=4)


def test_sdpa_large_scores_are_stable(device):
    """The online softmax rescales as the running max grows: large, growing scores stay finite."""
    q = np.tile(np.linspace(0, 30, 40, dtype=np.float32)[:, None], (1, 16))[None]
    k = q[:, ::-1].copy() + randn(1, 40, 16)
    check_op(_sdpa(F), q, k, randn(1, 40, 16), device=device, torch_fn=_sdpa(TF), atol=1e-3, rtol=1e-3, fd=False)


def test_sdpa_errors():
    q = wg.zeros(2, 4, 8)
    with pytest.raises(RuntimeError, match="divide the number of heads"):
        F.scaled_dot_product_attention(q.reshape(1, 2, 4, 8), wg.zeros(1, 3, 4, 8), wg.zeros(1, 3, 4, 8),
                                       enable_gqa=True)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=wg.zeros(4, 4, dtype=wg.int32))
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q, wg.zeros(2, 4, 8, dtype=wg.int32))
    with pytest.raises(RuntimeError, match="head size"):
        F.scaled_dot_product_attention(q, wg.zeros(2, 4, 6), q)
    with pytest.raises(RuntimeError, match="attn_mask should not be set"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=wg.ones(4, 4, dtype=wg.bool), is_causal=True)


def test_sdpa_past_the_grid():
    """A workgroup per (batch, block of 32 queries): past 65535 of them the grid spills into y
    (forward only: the backward's kernels place their workgroups the same way, and each costs
    lavapipe ~50 us)."""
    batch = wg.get_backend("webgpu").runtime.limits["max_compute_workgroups_per_dimension"] + 5
    check_op(_sdpa(F), randn(batch, 1, 8), randn(batch, 2, 8), randn(batch, 2, 8), device="webgpu",
             torch_fn=_sdpa(TF), grad=False)


@pytest.mark.parametrize("workgroup_bytes", [16384, 32768, 49152])
def test_attention_tiles_fit(workgroup_bytes):
    """Every head up to 128 gets tiles whose workgroup memory (and row_stats') fits the limit, within
    WebGPU's default 16 KiB wherever the largest tiles fit there, the adapter's larger memory only
    for larger tiles than 16 KiB holds."""
    for blockings in {SOFTWARE_BLOCKINGS, *BLOCKINGS.values()}:
        for nq in range(1, 33):
            for nv in range(1, 33):
                default = attention_tiles(nq, nv, 16384, blockings)
                tiles = attention_tiles(nq, nv, workgroup_bytes, blockings)
                used = tiles.bytes()
                assert used <= workgroup_bytes, tag(f"heads {4 * nq}, {4 * nv}: {tiles} takes {used} bytes")
                assert tiles == default or (tiles.other > default.other and used > 16384), \
                    tag(f"heads {4 * nq}, {4 * nv}: {tiles} where {default} fits 16 KiB")
    forward = BLOCKINGS["forward"]
    assert attention_tiles(16, 16, workgroup_bytes, forward).threads == forward[0].threads, \
        "heads of 64: the GPU's preferred forward"
    assert attention_tiles(32, 32, workgroup_bytes, forward).threads == forward[-1].threads, \
        "heads of 128: the preferred forward's tiles of 32 rows do not fit 16 KiB"
    assert attention_tiles(32, 32, 16384).other < attention_tiles(32, 32, 32768).other == OTHER_ROWS[0], \
        "heads of 128: the largest tiles where the memory holds them"


@pytest.fixture
def tiled(monkeypatch):
    """The tiled entries on this adapter too (a software adapter takes a thread per row: attention_rows.wgsl)."""
    monkeypatch.setattr(attention_kernels, "SOFTWARE_ROW_ENTRIES", ())
    monkeypatch.setattr(attention_kernels, "SOFTWARE_DELTA_LANES", attention_kernels.DELTA_LANES)


@pytest.mark.parametrize("batch,L,S,E,Ev", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("mask", ["causal", "bool", "float"])
def test_sdpa_tiled(batch, L, S, E, Ev, mask, tiled):
    """The tiled entries (a GPU's) against torch, as test_sdpa and test_sdpa_masks check the rows'."""
    inputs = [randn(*batch, L, E), randn(*batch, S, E), randn(*batch, S, Ev)]
    if mask == "bool":
        inputs.append(rng().random((L, S)) < 0.7)
    elif mask == "float":
        inputs.append(np.where(rng().random((L, S)) < 0.2, -np.inf, 2 * randn(L, S)).astype(np.float32))
    kwargs = {"is_causal": mask == "causal"}
    check_op(_sdpa(F, **kwargs), *inputs, device="webgpu", torch_fn=_sdpa(TF, **kwargs), grad=[0, 1, 2], fd=False)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_default_workgroup_memory(causal, monkeypatch, tiled):
    """Capped at WebGPU's default 16 KiB (the page's), heads of 128 take tiles of 16 keys, not the
    32 that an adapter with more workgroup memory gets: both tilings against torch."""
    limits = wg.get_backend("webgpu").runtime.limits
    assert attention_tiles(32, 32, limits["max_compute_workgroup_storage_size"]).other == 32
    monkeypatch.setitem(limits, "max_compute_workgroup_storage_size", 16384)
    mask = None if causal else rng().random((21, 35)) < 0.8
    check_op(_sdpa(F, is_causal=causal), randn(2, 21, 128), randn(2, 35, 128), randn(2, 35, 120),
             *([] if mask is None else [mask]), device="webgpu", torch_fn=_sdpa(TF, is_causal=causal), grad=[0, 1, 2],
             fd=False)


@pytest.mark.parametrize("blockings", [(Blocking(8, 4, 32),), (Blocking(4, 8, 32),), (Blocking(8, 4, 64),),
                                       BLOCKINGS["forward"]], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_other_blockings(blockings, causal, monkeypatch, tiled):
    """The kernels written out for other blocks of scores a thread (a GPU's forward; those that
    bench/attention.py --blocking compares) against torch: lengths past one tile, heads ending
    mid-chunk, E != Ev, a mask; heads of 128 too where the GPU's forward falls back."""
    monkeypatch.setattr(attention_kernels, "entry_blockings", lambda entry, is_software: blockings)
    mask = None if causal else rng().random((45, 37)) < 0.8
    heads = [(24, 40)] + ([(128, 120)] if blockings == BLOCKINGS["forward"] else [])
    for e, ev in heads:
        check_op(_sdpa(F, is_causal=causal), randn(2, 45, e), randn(2, 37, e), randn(2, 37, ev),
                 *([] if mask is None else [mask]), device="webgpu", torch_fn=_sdpa(TF, is_causal=causal),
                 grad=[0, 1, 2], fd=False)


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_sdpa_dropout_statistics(p, device):
    """With equal scores each weight is 1/S, so out = mean over keys of keep/(1-p) for values 1: mean
    1 and variance p / ((1-p) S) over many queries. dropout_p = 0 is exact."""
    rows, keys = 4096, 16
    q, k = wg.zeros(4, rows // 4, 8, device=device), wg.zeros(4, keys, 8, device=device)
    v = wg.ones(4, keys, 1, device=device)
    out = to_numpy(F.scaled_dot_product_attention(q, k, v, dropout_p=p)).ravel()
    var = p / ((1 - p) * keys)
    assert abs(out.mean() - 1) < 5 * math.sqrt(var / rows), tag(f"mean {out.mean()}")
    assert abs(out.var() - var) < 0.15 * var, tag(f"variance {out.var()} vs {var}")
    levels = np.round(out * keys * (1 - p)).astype(int)
    assert_close(out * keys * (1 - p), levels, atol=1e-3, what="kept counts are whole")
    x = [wg_tensor(randn(2, 9, 16), device) for _ in range(3)]
    assert_close(F.scaled_dot_product_attention(*x, dropout_p=0.0), F.scaled_dot_product_attention(*x),
                 atol=0, rtol=0, what="dropout_p 0")


@pytest.mark.parametrize("masking", ["mask", "causal"])
def test_sdpa_is_one_kernel_forward_three_backward(masking, monkeypatch):
    """Forward one kernel; backward the rows' (lse, D), then dk and dv, then dq."""
    q, k, v = (wg_tensor(randn(2, 3, n, 32), "webgpu", requires_grad=True) for n in (21, 30, 30))
    mask = wg_tensor(rng().random((21, 30)) < 0.8, "webgpu") if masking == "mask" else None
    g = wg_tensor(randn(2, 3, 21, 32), "webgpu")
    kernels = dispatched_kernels(monkeypatch)
    out = F.scaled_dot_product_attention(q, k, v, mask, is_causal=masking == "causal")
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    out.backward(g)
    assert len(kernels) == 4, tag(f"backward took {len(kernels) - 1} dispatches")


# ---- nn.MultiheadAttention ----
def _pair(device, embed_dim=16, num_heads=4, **kwargs):
    """(ours, torch's) with torch's (random) parameters copied into ours."""
    theirs = torch.nn.MultiheadAttention(embed_dim, num_heads, **kwargs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(randn(*p.shape)) * 0.5)
    ours = wg.nn.MultiheadAttention(embed_dim, num_heads, **kwargs, device=device)
    assert repr(ours) == repr(theirs), tag(repr(ours))
    assert list(ours.state_dict()) == list(theirs.state_dict()), tag(f"state_dict {list(ours.state_dict())}")
    ours.load_state_dict({name: wg_tensor(t.numpy(), device) for name, t in theirs.state_dict().items()})
    return ours, theirs


def _compare(ours, theirs, device, inputs, **kwargs):
    """Outputs and every gradient (inputs and parameters) of sum(out * upstream) against torch."""
    tensors = {name: a for name, a in inputs.items() if a is not None}
    t_in = {n: torch.tensor(a, requires_grad=a.dtype.kind == "f" and n in "qkv") for n, a in tensors.items()}
    w_in = {n: wg_tensor(a, device, requires_grad=a.dtype.kind == "f" and n in "qkv") for n, a in tensors.items()}
    names = {"q": "query", "k": "key", "v": "value", "kpm": "key_padding_mask", "mask": "attn_mask"}
    with warnings.catch_warnings(record=True) as t_warned:
        warnings.simplefilter("always")
        t_out, t_weights = theirs(**{names[n]: t for n, t in t_in.items()}, **kwargs)
    with warnings.catch_warnings(record=True) as w_warned:
        warnings.simplefilter("always")
        w_out, w_weights = ours(**{names[n]: t for n, t in w_in.items()}, **kwargs)
    assert ({str(w.message) for w in w_warned if "mismatched" in str(w.message)} ==
            {str(w.message) for w in t_warned if "mismatched" in str(w.message)}), tag("mismatched masks' warning")
    upstream = randn(*t_out.shape)
    (t_out * torch.from_numpy(upstream)).sum().backward()
    (w_out * wg_tensor(upstream, device)).sum().backward()
    assert_close(w_out, t_out, what="output")
    assert (w_weights is None) == (t_weights is None), tag("weights returned")
    if t_weights is not None:
        assert_close(w_weights, t_weights, what="attention weights")
    for n in "qkv":
        if t_in[n].requires_grad:
            assert_close(w_in[n].grad, t_in[n].grad, what=f"{n} gradient")
    ours_params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        assert_close(ours_params[name].grad, p.grad, what=f"{name} gradient")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masks", ["none", "bool", "float", "3d"])
def test_multihead_attention(batch_first, need_weights, average, masks, device):
    ours, theirs = _pair(device, batch_first=batch_first)
    n, length, source = 3, 7, 10
    order = (lambda s, e: (n, s, e)) if batch_first else (lambda s, e: (s, n, e))
    padding = attn = None
    if masks != "none":
        padding = rng().random((n, source)) < 0.3
        padding[:, 0] = False   # every query keeps a key
        attn = {"bool": lambda: rng().random((length, source)) < 0.3, "float": lambda: randn(length, source),
                "3d": lambda: randn(n * 4, length, source)}[masks]()
        if masks == "bool":
            attn[:, 0] = False
    inputs = dict(q=randn(*order(length, 16)), k=randn(*order(source, 16)), v=randn(*order(source, 16)), kpm=padding,
                  mask=attn)
    _compare(ours, theirs, device, inputs, need_weights=need_weights, average_attn_weights=average)


@pytest.mark.parametrize("kwargs", [{"kdim": 5, "vdim": 7}, {"add_bias_kv": True, "add_zero_attn": True},
                                    {"bias": False}, {"dropout": 0.5}])
def test_multihead_attention_variants(kwargs, device):
    """Separate projection weights, the extra bias and zero keys, no biases; dropout in eval mode is
    exact."""
    ours, theirs = _pair(device, **kwargs)
    ours.eval(), theirs.eval()
    inputs = dict(q=randn(6, 2, 16), k=randn(9, 2, kwargs.get("kdim", 16)), v=randn(9, 2, kwargs.get("vdim", 16)),
                  kpm=rng().random((2, 9)) < 0.2, mask=None)
    inputs["kpm"][:, 0] = False
    _compare(ours, theirs, device, inputs, need_weights=False)
    _compare(ours, theirs, device, inputs)


def test_multihead_attention_self_unbatched_causal(device):
    """Self-attention (one packed projection), unbatched inputs, the is_causal hint with a causal mask."""
    ours, theirs = _pair(device, embed_dim=24, num_heads=3)
    x = randn(11, 24)
    causal = np.triu(np.ones((11, 11), bool), 1)
    t_x, w_x = torch.tensor(x, requires_grad=True), wg_tensor(x, device, requires_grad=True)
    for need_weights in (False, True):
        t_out, _ = theirs(t_x, t_x, t_x, attn_mask=torch.tensor(causal), is_causal=True, need_weights=need_weights)
        w_out, _ = ours(w_x, w_x, w_x, attn_mask=wg_tensor(causal, device), is_causal=True, need_weights=need_weights)
        assert_close(w_out, t_out, what=f"output (need_weights={need_weights})")
        t_out.sum().backward()
        w_out.sum().backward()
        assert_close(w_x.grad, t_x.grad, what="input gradient")
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        ours(w_x, w_x, w_x, is_causal=True)
    with pytest.raises(AssertionError, match="divisible"):
        wg.nn.MultiheadAttention(10, 3)


def test_multihead_attention_dropout_trains(device):
    """In training, dropout drops weights: the output changes from draw to draw, its mean does not."""
    ours = wg.nn.MultiheadAttention(16, 2, dropout=0.3, batch_first=True, device=device)
    x = wg_tensor(randn(2, 64, 16), device)
    ours.eval()
    exact = to_numpy(ours(x, x, x, need_weights=False)[0])
    ours.train()
    drawn = [to_numpy(ours(x, x, x, need_weights=need)[0]) for need in (False, True)]
    assert not np.allclose(drawn[0], exact) and not np.allclose(drawn[0], drawn[1]), tag("dropout drew nothing")
    assert abs((np.mean(drawn, 0) - exact).mean()) < 0.05, tag("dropout's mean")
