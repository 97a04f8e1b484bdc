"""uint8 through the gather family and the reductions, against torch: indexing by index tensors,
lists and masks, index_select, flip, gather, sort and topk, scatter_add (sums wrap modulo 256),
amax/amin/max/min and argmax/argmin, on both devices; a DataLoader's batches of a uint8
TensorDataset; a wg.jit replay. The sources are strided views at offsets that are not multiples of
4 and the results have odd sizes: on webgpu a result's word of four bytes holds elements gathered
from anywhere in the source, and a thread writes it whole."""
import numpy as np
import pytest
import torch
import torch.utils.data as td

import webgrad as wg
import webgrad.utils.data as wd
from conftest import rng, tag
from test_uint8 import VIEWS, assert_same, odd_shape, pair


def source(device):
    """A 3-d uint8 view of odd sizes, strided, starting at an odd byte: (webgrad's, torch's)."""
    view = VIEWS[str(rng().choice(["transposed", "permuted", "sliced", "transposed slice"]))]
    x, t = pair(odd_shape(), device)
    return view(x[1:]), view(t[1:])


def index(low, high, shape, device):
    """The same fresh random int indices as a webgrad tensor on device and a torch tensor."""
    values = rng().integers(low, high, shape)
    return wg.tensor(values, device=device), torch.from_numpy(values)


def case_indices(x, device):
    """Each GATHERS case's indices for x: (webgrad's, torch's) per name."""
    s0, s1, s2 = x.shape
    count = int(rng().integers(1, 10))
    return {"rows": index(-s0, s0, (count,), device), "columns": index(0, s2, (count,), device),
            "pairs": index(0, s1, (count,), device), "along": index(0, s1, (s0, count, s2), device),
            "row mask": tuple(m.bool() for m in index(0, 2, (s0,), device))}


# name -> fn(library, x, indices of case_indices): the same gather in webgrad and torch
GATHERS = {
    "x[index tensor]": lambda L, x, i: x[i["rows"]],
    "x[list]": lambda L, x, i: x[i["rows"].tolist()],
    "x[:, index, 1:]": lambda L, x, i: x[:, i["pairs"], 1:],
    "x[index, :, index]": lambda L, x, i: x[i["rows"][:, None], :, i["columns"]],
    "x[row mask]": lambda L, x, i: x[i["row mask"]],
    "x[x > 128]": lambda L, x, i: x[x > 128],
    "masked_select": lambda L, x, i: L.masked_select(x, x < 60),
    "index_select": lambda L, x, i: L.index_select(x, 2, i["columns"]),
    "flip": lambda L, x, i: L.flip(x, [0, 2]),
    "gather": lambda L, x, i: L.gather(x, 1, i["along"]),
    "sort": lambda L, x, i: L.sort(x, dim=-1)[0],
    "topk": lambda L, x, i: L.topk(x, min(2, x.shape[1]), dim=1)[0],
}


@pytest.mark.parametrize("name", GATHERS)
def test_gathers_match_torch(device, name):
    x, t = source(device)
    indices = case_indices(x, device)
    ours = GATHERS[name](wg, x, {k: v[0] for k, v in indices.items()})
    assert ours.device == device, tag(name)
    assert_same(ours, GATHERS[name](torch, t, {k: v[1] for k, v in indices.items()}), name)


def test_scatter_adds_wrap_like_torch(device):
    """scatter_add and index_put_(accumulate=True) into uint8: repeated indices add up modulo 256."""
    x, t = source(device)
    s0, s1, s2 = x.shape
    (src, tsrc), (rows, trows) = pair((4, s1, s2), device), index(0, s0, (4, s1, s2), device)
    assert_same(wg.scatter_add(x, 0, rows, src), torch.scatter_add(t, 0, trows, tsrc), "scatter_add")
    (where, twhere), (values, tvalues) = index(0, s0, (7,), device), pair((7, s1, s2), device)
    assert_same(x.clone().index_put_((where,), values, accumulate=True),
                t.clone().index_put_((twhere,), tvalues, accumulate=True), "index_put_ accumulating")


@pytest.mark.parametrize("size", ["odd", "two passes"])
def test_reductions_match_torch(device, size):
    """amax/amin over dims, max/min of all and along a dim (with the index of the first extreme),
    argmax/argmin; "two passes": rows long enough that a row's chunks are reduced again."""
    if size == "odd":
        x, t = source(device)
    else:
        (x, t), width = pair((3, 2 * 2501), device), int(rng().integers(2200, 2501))
        x, t = x[:, 1:2 * width:2], t[:, 1:2 * width:2]
    first = np.asarray(t)   # numpy's argmax/argmin: the first of equal extremes, as webgrad's
    for dims in (None, 0, -1, (0, x.ndim - 1)):
        keepdim = bool(rng().random() < 0.5)
        for name in ("amax", "amin"):
            args = () if dims is None else (dims,)
            assert_same(getattr(x, name)(*args, keepdim=keepdim), getattr(t, name)(*args, keepdim=keepdim),
                        f"{name} over {dims}, keepdim {keepdim}")
    for name in ("max", "min"):
        assert_same(getattr(x, name)(), getattr(t, name)(), f"{name}()")
        dim = int(rng().integers(0, x.ndim))
        values, indices = getattr(x, name)(dim)
        assert_same(values, getattr(t, name)(dim)[0], f"{name}({dim})")
        np.testing.assert_array_equal(indices.numpy(), getattr(first, f"arg{name}")(dim), err_msg=tag(f"{name} indices"))
        np.testing.assert_array_equal(getattr(x, f"arg{name}")(dim).numpy(), getattr(first, f"arg{name}")(dim),
                                      err_msg=tag(f"arg{name}({dim})"))


def test_reductions_of_nothing_kept_match_torch(device):
    """A reduction with no outputs (a kept dim of size 0) gives an empty uint8 tensor."""
    x, t = pair((0, 5), device)
    assert_same(x.amax(1), t.amax(1), "amax of (0, 5) over dim 1")


def test_dataloader_batches_a_uint8_dataset_like_torch(device):
    """A TensorDataset of uint8 images (odd sizes, the images a view at an odd offset) and labels,
    batched by a DataLoader over a random order: each batch is torch's, and so is dataset[index]."""
    n, batch = int(rng().integers(9, 20)), int(rng().integers(2, 6))
    (images, timages), (labels, tlabels) = pair((n + 1, 5, 7), device), index(0, 10, (n,), device)
    ours, theirs = wd.TensorDataset(images[1:], labels), td.TensorDataset(timages[1:], tlabels)
    order = [int(k) for k in rng().permutation(n)]
    loaders = (wd.DataLoader(ours, batch_size=batch, sampler=order), td.DataLoader(theirs, batch_size=batch,
                                                                                 sampler=order))
    for step, ((x, y), (tx, ty)) in enumerate(zip(*loaders, strict=True)):
        assert x.device == device, tag(f"batch {step}")
        assert_same(x, tx, f"batch {step} images")
        np.testing.assert_array_equal(y.numpy(), ty.numpy(), err_msg=tag(f"batch {step} labels"))
    picked, tpicked = index(0, n, (batch,), device)
    assert_same(ours[picked][0], theirs[tpicked][0], "dataset[index tensor]")


def test_jit_replays_gathers_into_uint8():
    """Under wg.jit the gathers into uint8 and the uint8 reductions replay on fresh sources and
    indices, beside a fused map that reads the gathered bytes."""
    shape = odd_shape()

    def fn(L, x, rows):
        picked = x[rows]
        return picked, L.flip(x, [1]), x.amax(0), picked.float() / 255.0 - 0.5
    step = wg.jit(lambda x, rows: fn(wg, x, rows))
    for call in range(4):
        (x, t), (rows, trows) = pair(shape, "webgpu"), index(0, shape[0] - 1, (7,), "webgpu")
        for ours, theirs, what in zip(step(x[1:], rows), fn(torch, t[1:], trows), ("x[rows]", "flip", "amax", "floats")):
            if theirs.dtype is torch.float32:
                np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6,
                                           err_msg=tag(f"call {call}: {what}"))
            else:
                assert_same(ours, theirs, f"call {call}: {what}")
