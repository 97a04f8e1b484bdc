"""torch.nn.functional's composed layers against PyTorch on fresh random inputs, values and
gradients on both devices (float64 finite differences on cpu): activations (selu, hardswish, glu,
prelu, ...), normalize / cosine_similarity / pairwise_distance, group and instance norm, conv1d and
1-D pooling, adaptive pooling, interpolate and pixel (un)shuffle; plus errors of the same types."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from conftest import assert_close, check_op, distinct, finite_difference_check, nonzero, randn, rng, wg_tensor
from torch_api import raises_like


def _both(name, *args, **kwargs):
    """fn(namespace) that calls namespace.<name>(x, ..., *args, **kwargs), for check_op."""
    def run(ns):
        return lambda *tensors: getattr(ns, name)(*tensors, *args, **kwargs)
    return run(F), run(TF)


ACTIVATIONS = [("selu", (), {}), ("hardsigmoid", (), {}), ("hardswish", (), {}), ("softsign", (), {}),
               ("tanhshrink", (), {}), ("glu", (), {"dim": 1}), ("glu", (), {}), ("softmin", (), {"dim": 1}),
               ("softmin", (), {"dim": -1}), ("celu", (), {"alpha": 0.7}), ("hardshrink", (), {}),
               ("softshrink", (), {"lambd": 0.3}), ("threshold", (0.2, -1.5), {})]


@pytest.mark.parametrize("name,args,kwargs", ACTIVATIONS, ids=lambda v: str(v) if isinstance(v, str) else "")
def test_activations(name, args, kwargs, device):
    ours, theirs = _both(name, *args, **kwargs)
    check_op(ours, 2.5 * nonzero(3, 4, 6), device=device, torch_fn=theirs)


def test_softmin_dtype_and_implicit_dim():
    x = randn(3, 4)
    out = F.softmin(wg.tensor(x), 1, dtype=wg.float64)
    assert out.dtype is wg.float64
    assert_close(out, TF.softmin(torch.tensor(x), 1, dtype=torch.float64))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        implicit = F.softmin(wg.tensor(x))
    assert_close(implicit, TF.softmin(torch.tensor(x), 1))


@pytest.mark.parametrize("shape,weights", [((5, 3, 4), 3), ((5, 3, 4), 1), ((7,), 1), ((2, 4), 4), ((), 1)])
def test_prelu(shape, weights, device):
    check_op(F.prelu, nonzero(*shape), np.asarray(rng().uniform(0.05, 0.5, weights), np.float32), device=device,
             torch_fn=TF.prelu)


def test_prelu_errors():
    raises_like(lambda: F.prelu(wg.zeros(2, 3), wg.ones(4)), lambda: TF.prelu(torch.zeros(2, 3), torch.ones(4)))
    raises_like(lambda: F.prelu(wg.zeros(3), wg.ones(3)), lambda: TF.prelu(torch.zeros(3), torch.ones(3)))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize(p, dim, device):
    ours, theirs = _both("normalize", p=p, dim=dim)
    check_op(ours, randn(3, 5, 2), device=device, torch_fn=theirs)


@pytest.mark.parametrize("shapes,dim", [(((4, 6), (4, 6)), 1), (((3, 1, 5), (4, 5)), -1), (((2, 3), (3,)), -1)])
def test_cosine_similarity(shapes, dim, device):
    ours, theirs = _both("cosine_similarity", dim=dim)
    check_op(ours, randn(*shapes[0]), randn(*shapes[1]), device=device, torch_fn=theirs)


@pytest.mark.parametrize("p,keepdim,shapes", [(2.0, False, ((4, 5), (4, 5))), (1.0, True, ((3, 4), (4,))),
                                              (3.0, False, ((6,), (6,)))])
def test_pairwise_distance(p, keepdim, shapes, device):
    ours, theirs = _both("pairwise_distance", p=p, keepdim=keepdim)
    check_op(ours, randn(*shapes[0]), randn(*shapes[1]), device=device, torch_fn=theirs)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 3, 2), 2), ((2, 5), 5), ((1, 4, 7), 1)])
def test_group_norm(shape, groups, device):
    c = shape[1]
    check_op(lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-4), 2 * randn(*shape) + 1, randn(c), randn(c),
             device=device, torch_fn=lambda x, w, b: TF.group_norm(x, groups, w, b, eps=1e-4))
    check_op(lambda x: F.group_norm(x, groups), randn(*shape), device=device,
             torch_fn=lambda x: TF.group_norm(x, groups))


def test_group_norm_errors():
    raises_like(lambda: F.group_norm(wg.zeros(2, 5, 3), 2), lambda: TF.group_norm(torch.zeros(2, 5, 3), 2))
    raises_like(lambda: F.group_norm(wg.zeros(5), 1), lambda: TF.group_norm(torch.zeros(5), 1))


@pytest.mark.parametrize("shape", [(2, 3, 7), (3, 2, 4, 3)])
def test_instance_norm(shape, device):
    c = shape[1]
    check_op(lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-4), 2 * randn(*shape) - 1, randn(c),
             randn(c), device=device, torch_fn=lambda x, w, b: TF.instance_norm(x, weight=w, bias=b, eps=1e-4))
    # running statistics: blended as PyTorch blends them, and used when use_input_stats is False
    x = randn(*shape)
    stats = [rng().uniform(-1, 1, c).astype(np.float32), rng().uniform(0.5, 2, c).astype(np.float32)]
    ours, theirs = [wg_tensor(s, device) for s in stats], [torch.tensor(s) for s in stats]
    out = F.instance_norm(wg_tensor(x, device), *ours, momentum=0.3)
    expected = TF.instance_norm(torch.tensor(x), *theirs, momentum=0.3)
    assert_close(out, expected, what="output")
    for o, t in zip(ours, theirs):
        assert_close(o, t, what="running statistics")
    check_op(lambda t: F.instance_norm(t, *(s.to(t.device) for s in ours), use_input_stats=False), x, device=device,
             torch_fn=lambda t: TF.instance_norm(t, *theirs, use_input_stats=False))
    raises_like(lambda: F.instance_norm(wg.zeros(2, 3, 1)), lambda: TF.instance_norm(torch.zeros(2, 3, 1)))


CONV1D = [((2, 3, 11), (4, 3, 3), {}), ((1, 2, 9), (3, 2, 4), {"stride": 2, "padding": 1, "dilation": 2}),
          ((3, 10), (2, 3, 3), {"padding": "same"}), ((2, 2, 8), (5, 2, 4), {"padding": "same", "dilation": 2}),
          ((2, 3, 7), (2, 3, 7), {"padding": "valid"})]


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CONV1D)
def test_conv1d(x_shape, w_shape, kwargs, device):
    ours, theirs = _both("conv1d", **kwargs)
    check_op(ours, randn(*x_shape), randn(*w_shape), randn(w_shape[0]), device=device, torch_fn=theirs)


@pytest.mark.parametrize("x_shape,kwargs", [((2, 3, 11), {"kernel_size": 3}),
                                            ((3, 9), {"kernel_size": 4, "stride": 2, "padding": 2}),
                                            ((1, 2, 10), {"kernel_size": 3, "stride": 1, "padding": 1})])
@pytest.mark.parametrize("name", ["max_pool1d", "avg_pool1d"])
def test_pool1d(x_shape, kwargs, name, device):
    ours, theirs = _both(name, **kwargs)
    check_op(ours, distinct(*x_shape), device=device, torch_fn=theirs)
    if name == "max_pool1d":
        got = F.max_pool1d(wg_tensor(distinct(*x_shape), device), return_indices=True, **kwargs)
        assert len(got) == 2 and tuple(got[1].shape) == tuple(got[0].shape)


@pytest.mark.parametrize("shape,size", [((2, 3, 7), 3), ((3, 10), 10), ((2, 3, 6), 1), ((2, 2, 7, 5), (3, 2)),
                                        ((3, 5, 9), (4, None)), ((1, 2, 4, 6), 5)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pool(shape, size, kind, device):
    name = f"adaptive_{kind}_pool{1 if isinstance(size, int) and len(shape) <= 3 else 2}d"
    ours, theirs = _both(name, size)
    check_op(ours, distinct(*shape), device=device, torch_fn=theirs)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pool3d(kind, device):
    ours, theirs = _both(f"adaptive_{kind}_pool3d", (2, None, 3))
    check_op(ours, distinct(1, 2, 5, 2, 4), device=device, torch_fn=theirs)


def test_adaptive_pool_errors():
    raises_like(lambda: F.adaptive_avg_pool2d(wg.zeros(5, 7), 3), lambda: TF.adaptive_avg_pool2d(torch.zeros(5, 7), 3))
    raises_like(lambda: F.adaptive_avg_pool1d(wg.zeros(2, 3, 0), 3),
                lambda: TF.adaptive_avg_pool1d(torch.zeros(2, 3, 0), 3))


INTERPOLATE = [((2, 3, 5), {"size": 8, "mode": "nearest"}), ((2, 3, 7), {"scale_factor": 0.6, "mode": "nearest"}),
               ((1, 2, 5), {"size": 10, "mode": "nearest"}), ((1, 2, 10), {"scale_factor": 2.05, "mode": "nearest"}),
               ((1, 2, 10), {"scale_factor": 1.05, "mode": "nearest"}),
               ((2, 2, 6), {"size": 9, "mode": "nearest-exact"}), ((2, 3, 5), {"size": 8, "mode": "linear"}),
               ((2, 3, 8), {"size": 5, "mode": "linear", "align_corners": True}),
               ((1, 2, 6), {"scale_factor": 1.7, "mode": "linear"}), ((1, 2, 6), {"size": 1, "mode": "linear"}),
               ((1, 2, 4, 5), {"size": (7, 3), "mode": "bilinear"}),
               ((2, 1, 4, 5), {"scale_factor": 2, "mode": "bilinear", "align_corners": True}),
               ((1, 2, 3, 5), {"scale_factor": (1.5, 0.7), "mode": "bilinear"}),
               ((1, 2, 4, 3), {"scale_factor": 1.5, "mode": "bilinear", "recompute_scale_factor": True}),
               ((1, 2, 4, 5), {"size": (6, 6), "mode": "nearest"}),
               ((1, 1, 5, 10), {"scale_factor": (1.05, 2.05), "mode": "nearest"}),
               ((1, 2, 3, 4, 2), {"size": (5, 3, 4), "mode": "trilinear"}),
               ((1, 1, 3, 2, 4), {"scale_factor": 2, "mode": "nearest"}),
               ((2, 3, 7, 5), {"size": (3, 4), "mode": "area"})]


@pytest.mark.parametrize("shape,kwargs", INTERPOLATE, ids=lambda v: "-".join(f"{k}={w}" for k, w in v.items())
                         if isinstance(v, dict) else "x".join(map(str, v)))
def test_interpolate(shape, kwargs, device):
    ours, theirs = _both("interpolate", **kwargs)
    x = randn(*shape)
    # PyTorch's 1-D and 3-D nearest backward copies at 1x and halves at 2x where its forward does not:
    # there the gradient is checked against finite differences of the (PyTorch-matching) forward alone
    consistent = kwargs["mode"] != "nearest" or len(shape) == 4 or \
        all(out not in (n, 2 * n) for n, out in zip(shape[2:], TF.interpolate(torch.zeros(shape), **kwargs).shape[2:]))
    check_op(ours, x, device=device, torch_fn=theirs, grad=consistent)
    if not consistent:
        finite_difference_check(ours, x)


def test_interpolate_modes_not_supported():
    for kwargs in ({"mode": "bicubic"}, {"mode": "lanczos", "antialias": True},
                   {"mode": "bilinear", "antialias": True}):
        with pytest.raises(NotImplementedError, match="not supported"):
            F.interpolate(wg.zeros(1, 2, 3, 3), size=4, **kwargs)


@pytest.mark.parametrize("call", [
    lambda ns, x: ns.interpolate(x, size=4, mode="linear"),
    lambda ns, x: ns.interpolate(x, size=4, mode="nearest", align_corners=True),
    lambda ns, x: ns.interpolate(x, size=4, scale_factor=2.0),
    lambda ns, x: ns.interpolate(x),
    lambda ns, x: ns.interpolate(x, size=(2, 3, 4)),
    lambda ns, x: ns.interpolate(x[0, 0], size=4),
    lambda ns, x: ns.interpolate(x, size=4, mode="bogus"),
])
def test_interpolate_errors(call):
    raises_like(lambda: call(F, wg.zeros(1, 2, 3, 3)), lambda: call(TF, torch.zeros(1, 2, 3, 3)))


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 2), 2), ((9, 2, 3), 3), ((2, 1, 4, 4, 1), 1)])
def test_pixel_shuffle(shape, r, device):
    ours, theirs = _both("pixel_shuffle", r)
    check_op(ours, randn(*shape), device=device, torch_fn=theirs)
    back, theirs_back = _both("pixel_unshuffle", r)
    check_op(back, randn(*TF.pixel_shuffle(torch.zeros(shape), r).shape), device=device, torch_fn=theirs_back)


def test_pixel_shuffle_errors():
    raises_like(lambda: F.pixel_shuffle(wg.zeros(1, 5, 2, 2), 2), lambda: TF.pixel_shuffle(torch.zeros(1, 5, 2, 2), 2))
    raises_like(lambda: F.pixel_unshuffle(wg.zeros(1, 1, 3, 4), 2),
                lambda: TF.pixel_unshuffle(torch.zeros(1, 1, 3, 4), 2))
    raises_like(lambda: F.pixel_shuffle(wg.zeros(4, 2), 2), lambda: TF.pixel_shuffle(torch.zeros(4, 2), 2))


# (shape, widths, mode): each mode over 1, 2 and 3 trailing dims, batched and not; negative widths crop
PADS = [((2, 3, 5), (2, 1), "reflect"), ((1, 2, 4, 3), (1, 2, 2, 0), "reflect"), ((2, 4, 3, 5), (0, 1, 2, 2), "reflect"),
        ((3, 5), (4, 0), "replicate"), ((1, 1, 3, 3, 4), (1, 1, 2, 0, 1, 2), "replicate"),
        ((2, 6), (-1, 2), "replicate"), ((2, 3, 5), (2, 1), "circular"), ((1, 2, 5, 6), (2, -3, -1, 1), "circular"),
        ((1, 1, 3, 3, 4), (1, 2, 0, 1, 2, 2), "circular"), ((2, 3, 5), (2, 1), "constant")]


@pytest.mark.parametrize("shape,widths,mode", PADS)
def test_pad_modes(shape, widths, mode, device):
    ours, theirs = _both("pad", widths, mode)
    check_op(ours, randn(*shape), device=device, torch_fn=theirs)


@pytest.mark.parametrize("call", [
    lambda ns, x: ns.pad(x, (3, 3), mode="reflect"),
    lambda ns, x: ns.pad(x[0, 0], (1, 1), mode="reflect"),
    lambda ns, x: ns.pad(x, (1, 1), mode="wrap"),
    lambda ns, x: ns.pad(x, (4, 4), mode="circular"),
    lambda ns, x: ns.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"),
    lambda ns, x: ns.pad(x, (1, 1), mode="reflect", value=2.0),
])
def test_pad_errors(call):
    raises_like(lambda: call(F, wg.zeros(1, 2, 3)), lambda: call(TF, torch.zeros(1, 2, 3)))
