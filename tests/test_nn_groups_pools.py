"""Grouped and depthwise convolutions, pooling with ceil_mode, EmbeddingBag and torch.linalg's
norms, against PyTorch on CPU (and float64 finite differences on cpu) on both devices."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
from webgrad import nn
from webgrad.nn import functional as F
from conftest import assert_close, check_op, dispatched_kernels, distinct, integers, randn, rng, tag
from torch_api import raises_like, same_error

# `device` is conftest's fixture: every test runs on cpu and webgpu


def _same_error(make):
    """make(webgrad) raises what make(torch) raises: the same type and message."""
    same_error(lambda: make(wg), lambda: make(torch))


# ---- grouped convolution ----
@pytest.mark.parametrize("groups,c_in,c_out,kwargs", [
    (5, 5, 5, {"padding": 1}),                                   # depthwise
    (3, 3, 6, {"stride": (2, 1)}),                               # depthwise, two filters a channel
    (2, 4, 6, {"stride": 2, "padding": 2, "dilation": 2}),
], ids=["depthwise", "multiplier", "strided-dilated"])
def test_grouped_conv2d_matches_torch(groups, c_in, c_out, kwargs, device):
    x, w, b = randn(2, c_in, 7, 6), randn(c_out, c_in // groups, 3, 2), randn(c_out)
    check_op(lambda x, w, b: F.conv2d(x, w, b, groups=groups, **kwargs), x, w, b, device=device,
             torch_fn=lambda x, w, b: TF.conv2d(x, w, b, groups=groups, **kwargs))


def test_grouped_conv1d_and_transposed_match_torch(device):
    check_op(lambda x, w: F.conv1d(x, w, None, 1, 1, 1, 2), randn(2, 4, 9), randn(6, 2, 3), device=device,
             torch_fn=lambda x, w: TF.conv1d(x, w, None, 1, 1, 1, 2))
    check_op(lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2), randn(2, 4, 4, 3), randn(4, 3, 3, 2),
             randn(6), device=device, torch_fn=lambda x, w, b: TF.conv_transpose2d(x, w, b, 2, 1, 1, 2))


def _same_module(ours, theirs, x, device, **forward):
    """theirs' weights loaded into ours and back, then equal reprs, state_dicts, outputs and gradients."""
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    theirs.load_state_dict({k: torch.from_numpy(v.detach().numpy()) for k, v in ours.state_dict().items()})
    ours.to(device)
    xs, txs = wg.tensor(x, device=device, requires_grad=x.dtype.kind == "f"), torch.from_numpy(x)
    if x.dtype.kind == "f":
        txs.requires_grad_()
    y = ours(xs, **{k: wg.tensor(v, device=device) for k, v in forward.items()})
    ty = theirs(txs.long() if x.dtype.kind == "i" else txs, **{k: torch.from_numpy(v).long() for k, v in forward.items()})
    g = randn(*ty.shape)
    (y * wg.tensor(g, device=device)).sum().backward()
    (ty * torch.from_numpy(g)).sum().backward()
    assert_close(y, ty, what=f"{device}: output")
    if x.dtype.kind == "f":
        assert_close(xs.grad, txs.grad, what=f"{device}: input gradient")
    for (name, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        assert_close(p.grad, tp.grad, what=f"{device}: gradient of {name}")


@pytest.mark.parametrize("make,shape", [
    (lambda m: m.Conv2d(6, 4, 3, padding=1, groups=2), (2, 6, 5, 4)),
    (lambda m: m.Conv2d(4, 8, (3, 2), stride=2, groups=4, bias=False), (1, 4, 7, 5)),
    (lambda m: m.Conv1d(4, 6, 3, groups=2), (2, 4, 7)),
    (lambda m: m.ConvTranspose2d(4, 6, 3, stride=2, groups=2), (1, 4, 3, 4)),
    (lambda m: m.ConvTranspose1d(6, 3, 2, groups=3), (2, 6, 5)),
], ids=["conv2d", "depthwise", "conv1d", "transposed2d", "transposed1d"])
def test_grouped_conv_modules_match_torch(make, shape, device):
    _same_module(make(nn), make(torch.nn), randn(*shape), device)


def test_grouped_conv_takes_the_dispatches_of_an_ungrouped_one(monkeypatch):
    """Every group's product is in one batched dispatch: 16 depthwise channels cost what 2 groups and
    an ungrouped convolution do."""
    counts = []
    for groups in (1, 2, 16):
        x = wg.tensor(randn(1, 16, 6, 5), device="webgpu", requires_grad=True)
        w = wg.tensor(randn(16, 16 // groups, 3, 3), device="webgpu", requires_grad=True)
        kernels = dispatched_kernels(monkeypatch)
        F.conv2d(x, w, padding=1, groups=groups).sum().backward()
        counts.append(len(kernels))
        monkeypatch.undo()
    assert counts[0] == counts[1] == counts[2], tag(f"dispatches for groups 1, 2 and 16: {counts}")


@pytest.mark.parametrize("make", [
    lambda m: m.nn.Conv2d(3, 4, 3, groups=2),
    lambda m: m.nn.Conv2d(4, 3, 3, groups=2),
    lambda m: m.nn.Conv1d(4, 4, 3, groups=0),
    lambda m: m.nn.ConvTranspose2d(4, 3, 3, groups=2),
    lambda m: m.nn.functional.conv2d(m.zeros(1, 3, 5, 5), m.zeros(4, 2, 3, 3), groups=2),
    lambda m: m.nn.functional.conv2d(m.zeros(1, 4, 5, 5), m.zeros(3, 2, 3, 3), groups=2),
    lambda m: m.nn.functional.conv2d(m.zeros(1, 4, 5, 5), m.zeros(4, 2, 3, 3), groups=0),
    lambda m: m.nn.functional.conv1d(m.zeros(1, 3, 5), m.zeros(4, 2, 3), groups=2),
    lambda m: m.nn.functional.conv_transpose2d(m.zeros(1, 3, 5, 5), m.zeros(3, 2, 3, 3), groups=2),
])
def test_conv_group_errors_are_torchs(make):
    _same_error(make)


# ---- ceil_mode pooling ----
POOLS = [   # (name, kwargs, input shape): sizes the stride does not divide, so the last window overhangs
    ("max_pool2d", {"kernel_size": 2}, (2, 3, 5, 7)),
    ("max_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 6, 8)),
    ("max_pool2d", {"kernel_size": 2, "stride": 2, "padding": 1}, (1, 2, 5, 4)),   # torch drops the last window
    ("avg_pool2d", {"kernel_size": 2}, (2, 3, 5, 7)),
    ("avg_pool2d", {"kernel_size": (3, 2), "stride": (2, 3), "padding": 1}, (1, 2, 6, 8)),
    ("avg_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, (1, 2, 6, 7)),
    ("avg_pool2d", {"kernel_size": 2, "stride": 2, "padding": 1, "divisor_override": 3}, (1, 2, 5, 4)),
    ("max_pool1d", {"kernel_size": 3, "stride": 2}, (2, 3, 8)),
    ("avg_pool1d", {"kernel_size": 2, "stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 6)),
]


@pytest.mark.parametrize("name,kwargs,shape", POOLS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(POOLS)])
def test_ceil_mode_pools_match_torch(name, kwargs, shape, device):
    check_op(lambda x: getattr(F, name)(x, ceil_mode=True, **kwargs), distinct(*shape), device=device,
             torch_fn=lambda x: getattr(TF, name)(x, ceil_mode=True, **kwargs))


def test_ceil_mode_integer_pools(device):
    """int32 averages (truncated) and maxima at the ceil'd edge, as torch's int64."""
    x = integers(2, 2, 5, 7, low=-50, high=50)
    for name, kwargs in (("avg_pool2d", {"kernel_size": 3, "stride": 2, "padding": 1}),
                         ("max_pool2d", {"kernel_size": 2})):
        ours = getattr(F, name)(wg.tensor(x, device=device), ceil_mode=True, **kwargs)
        assert ours.dtype is wg.int32
        assert_close(ours, getattr(TF, name)(torch.from_numpy(x).long(), ceil_mode=True, **kwargs),
                     what=f"{device}: int32 {name}")


@pytest.mark.parametrize("make,shape", [
    (lambda m: m.MaxPool2d(3, 2, 1, ceil_mode=True), (1, 2, 6, 8)),
    (lambda m: m.AvgPool2d(2, ceil_mode=True, count_include_pad=False), (2, 1, 5, 5)),
    (lambda m: m.MaxPool1d(2, ceil_mode=True), (2, 3, 7)),
    (lambda m: m.AvgPool1d(3, 2, 1, ceil_mode=True), (2, 3, 8)),
], ids=["max2d", "avg2d", "max1d", "avg1d"])
def test_ceil_mode_pool_modules_match_torch(make, shape, device):
    _same_module(make(nn), make(torch.nn), distinct(*shape), device)


# ---- EmbeddingBag ----
def _bags(count, rows):
    """Indices of `count` bags of 0 to 3 rows each (an empty one among them), and their offsets."""
    lengths = rng().integers(0, 4, count)
    lengths[rng().integers(count)] = 0
    return integers(int(lengths.sum()), high=rows), np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_with_offsets_matches_torch(mode, padding_idx, device):
    indices, offsets = _bags(5, 6)
    indices[: len(indices) // 2] = 2   # padding_idx among them
    weight = distinct(6, 3)
    weights = (randn(len(indices)),) if mode == "sum" else ()

    def bag(f, last):
        return lambda w, i, o, *p: f(i, w, o, mode=mode, padding_idx=padding_idx, include_last_offset=last,
                                     per_sample_weights=p[0] if p else None)
    for last in (False, True):
        o = np.concatenate([offsets, *((np.array([len(indices)], np.int32),) if last else ())])
        check_op(bag(F.embedding_bag, last), weight, indices, o, *weights, device=device,
                 torch_fn=bag(TF.embedding_bag, last))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_2d_input_matches_torch(mode, device):
    check_op(lambda w, i: F.embedding_bag(i, w, mode=mode, padding_idx=-1), distinct(5, 4), integers(3, 4, high=5),
             device=device, torch_fn=lambda w, i: TF.embedding_bag(i, w, mode=mode, padding_idx=-1))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_no_indices_is_zeros(mode, device):
    check_op(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode), randn(4, 3), np.zeros(0, np.int32),
             np.zeros(3, np.int32), device=device, torch_fn=lambda w, i, o: TF.embedding_bag(i, w, o, mode=mode))


def test_embedding_bag_module_matches_torch(device):
    for make in (lambda m: m.EmbeddingBag(7, 3), lambda m: m.EmbeddingBag(7, 4, mode="max", padding_idx=1)):
        indices, offsets = _bags(4, 7)
        _same_module(make(nn), make(torch.nn), indices, device, offsets=offsets)
    ours = nn.EmbeddingBag(5, 2, mode="sum", padding_idx=3)
    assert not ours.weight.detach().numpy()[3].any(), "the padding row is not zeroed"
    table, indices = randn(4, 3), integers(2, 3, high=4)
    bag = nn.EmbeddingBag.from_pretrained(wg.tensor(table, device=device), mode="max")
    assert not bag.weight.requires_grad
    assert_close(bag(wg.tensor(indices, device=device)),
                 torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(table), mode="max")(torch.from_numpy(indices)),
                 what=f"{device}: from_pretrained")


EMBEDDING_BAG_ERRORS = [
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5, 3), m.tensor([0]), mode="foo"),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5, 3), m.tensor([0]), mode="mean",
                                            per_sample_weights=m.ones(2)),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5, 3), m.tensor([0]), mode="sum",
                                            per_sample_weights=m.ones(3)),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5, 3)),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5, 3), m.tensor([[0]])),
    lambda m: m.nn.functional.embedding_bag(m.zeros(1, 1, 1, dtype=m.int32), m.zeros(5, 3)),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.zeros(5), m.tensor([0])),
    lambda m: m.nn.functional.embedding_bag(m.tensor([[1, 2]]), m.zeros(5, 3), padding_idx=7),
    lambda m: m.nn.EmbeddingBag(5, 3, mode="median")(m.tensor([[1, 2]])),
]


@pytest.mark.parametrize("make", EMBEDDING_BAG_ERRORS)
def test_embedding_bag_errors_are_torchs(make):
    _same_error(make)


def test_embedding_bag_of_2d_input_takes_no_offsets():
    def make(m):
        return m.nn.functional.embedding_bag(m.tensor([[1, 2]]), m.zeros(5, 3), m.tensor([0]))
    ours, _ = raises_like(lambda: make(wg), lambda: make(torch))
    assert str(ours).startswith("if input is 2D, then offsets has to be None"), tag(str(ours))


# ---- torch.linalg norms ----
NORMS = [   # (input shape, kwargs)
    ((5,), {}), ((5,), {"ord": math.inf}), ((5,), {"ord": -math.inf}), ((5,), {"ord": 1}), ((5,), {"ord": 3}),
    ((3, 4), {}), ((3, 4), {"ord": "fro"}), ((3, 4), {"ord": 1}), ((3, 4), {"ord": -1}),
    ((3, 4), {"ord": math.inf}), ((3, 4), {"ord": -math.inf}),
    ((2, 3, 4), {"ord": 1, "dim": (0, 2)}), ((2, 3, 4), {"ord": -math.inf, "dim": (2, 0), "keepdim": True}),
    ((2, 3, 4), {"ord": 1, "dim": -1}), ((2, 3, 4), {}), ((2, 3, 4), {"ord": "fro", "dim": (-1, 1)}),
]


@pytest.mark.parametrize("shape,kwargs", NORMS, ids=[f"{len(s)}d-{k}" for s, k in NORMS])
def test_linalg_norm_matches_torch(shape, kwargs, device):
    check_op(lambda a: wg.linalg.norm(a, **kwargs), distinct(*shape), device=device,
             torch_fn=lambda a: torch.linalg.norm(a, **kwargs))


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
def test_linalg_matrix_norm_matches_torch(ord, device):
    check_op(lambda a: wg.linalg.matrix_norm(a, ord, keepdim=True), distinct(2, 4, 3), device=device,
             torch_fn=lambda a: torch.linalg.matrix_norm(a, ord, keepdim=True))


@pytest.mark.parametrize("make", [
    lambda m: m.linalg.norm(m.zeros(3), "fro"),
    lambda m: m.linalg.norm(m.zeros(3, 3, 3), 2),
    lambda m: m.linalg.norm(m.zeros(3, 3), 3),
    lambda m: m.linalg.matrix_norm(m.zeros(3), "fro"),
    lambda m: m.linalg.norm(m.zeros(3, 3), ord=1, dim=(0, 0)),
    lambda m: m.linalg.norm(m.zeros(3, 3), dim=(0, 1, 1)),
])
def test_linalg_norm_errors_are_torchs(make):
    _same_error(make)


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_linalg_norms_that_need_an_svd_say_so(ord):
    with pytest.raises(NotImplementedError, match="SVD"):
        wg.linalg.norm(wg.zeros(3, 3), ord)
