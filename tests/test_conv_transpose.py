"""F.conv_transpose1d / conv_transpose2d and nn.ConvTranspose1d / ConvTranspose2d against PyTorch on
fresh random inputs: values and gradients (input, weight, bias) on both devices, float64 finite
differences on cpu; strides, padding, output_padding, dilation, unbatched inputs, output_size, the
modules' state_dict, initialisation and reprs, and errors of the same types."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import webgrad as wg
import webgrad.nn.functional as F
from webgrad import nn
from conftest import check_op, randn
from module_oracle import compare_modules, copy_from_torch
from torch_api import raises_like, signature

CASES_2D = [((2, 3, 4, 5), (3, 2, 3, 3), {}),
            ((1, 2, 3, 4), (2, 3, 3, 2), {"stride": 2, "padding": 1, "output_padding": 1}),
            ((2, 2, 3, 3), (2, 2, 2, 3), {"stride": (3, 1), "padding": (0, 1), "dilation": (1, 2)}),
            ((3, 4, 3), (3, 2, 4, 4), {"stride": 2, "padding": 1}),
            ((1, 2, 6, 5), (2, 1, 3, 3), {"padding": 3})]   # padding past the kernel: the border is cropped
CASES_1D = [((2, 3, 6), (3, 2, 3), {}), ((2, 5), (2, 3, 4), {"stride": 3, "padding": 1, "output_padding": 2}),
            ((1, 2, 4), (2, 2, 3), {"dilation": 2, "padding": 2})]


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CASES_2D)
def test_conv_transpose2d(x_shape, w_shape, kwargs, device):
    check_op(lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs), randn(*x_shape), randn(*w_shape),
             randn(w_shape[1]), device=device, torch_fn=lambda x, w, b: TF.conv_transpose2d(x, w, b, **kwargs))


@pytest.mark.parametrize("x_shape,w_shape,kwargs", CASES_1D)
def test_conv_transpose1d(x_shape, w_shape, kwargs, device):
    check_op(lambda x, w: F.conv_transpose1d(x, w, **kwargs), randn(*x_shape), randn(*w_shape), device=device,
             torch_fn=lambda x, w: TF.conv_transpose1d(x, w, **kwargs))


@pytest.mark.parametrize("name,args,kwargs,shape,output_size", [
    ("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 3, 4), (6, 8)),
    ("ConvTranspose2d", (2, 3, (2, 3)), {"bias": False, "dilation": 2}, (2, 4, 3), None),
    ("ConvTranspose1d", (2, 3, 4), {"stride": 2, "output_padding": 1}, (2, 2, 5), None),
    ("ConvTranspose1d", (3, 2, 3), {"stride": 3}, (2, 3, 4), [2, 2, 12]),
])
def test_modules(name, args, kwargs, shape, output_size, device):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert signature(type(ours).__init__) == signature(type(theirs).__init__)
    copy_from_torch(ours, theirs)
    ours.to(device)
    compare_modules(ours, theirs, device, [randn(*shape)], call=lambda m, x: m(x, output_size=output_size))


def test_init_is_torchs():
    conv = nn.ConvTranspose2d(6, 4, 3)   # fan_in = 4 * 3 * 3 (the weight's dim 1)
    bound = 1 / np.sqrt(4 * 9)
    for p in (conv.weight, conv.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.5 * bound


def test_errors_match_torch():
    x, w = randn(1, 3, 4, 4), randn(3, 2, 3, 3)
    for call in (lambda ns, t, v: ns.conv_transpose2d(t, v, stride=2, output_padding=2),
                 lambda ns, t, v: ns.conv_transpose2d(t[:, :2], v)):
        raises_like(lambda: call(F, wg.tensor(x), wg.tensor(w)),
                    lambda: call(TF, torch.tensor(x), torch.tensor(w)))
    for make in (lambda ns: ns.ConvTranspose2d(3, 2, 3, stride=2)(zeros(ns, 1, 3, 4, 4), output_size=(11, 11)),
                 lambda ns: ns.ConvTranspose2d(3, 2, 3, padding_mode="reflect")):
        raises_like(lambda: make(nn), lambda: make(torch.nn))


def zeros(ns, *shape):
    return (wg if ns is nn else torch).zeros(*shape)
