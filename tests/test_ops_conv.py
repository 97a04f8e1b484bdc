"""conv2d and pad (webgrad.ops.conv) against torch.nn.functional, finite differences (float64, cpu)
and webgpu against cpu; the sliding-window view and its fold gradient; conv2d's dispatches; the errors
of conv2d, the pools and pad (the pools themselves: test_ops_pool.py)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import (assert_close, check_op, dispatched_kernels, finite_difference_check, integers, randn, random_shape,
                      rng, tag, to_numpy, wg_tensor)
from webgrad.ops.conv import avg_pool2d, conv2d, max_pool2d, pad, windows
from window_cases import draw, input_size, pair_or_int


def _conv_case(max_kernel=5, extra=6):
    n, cin, cout = draw(1, 3), draw(1, 4), draw(1, 4)
    kh, kw = draw(1, max_kernel), draw(1, max_kernel)
    sh, sw = draw(1, 3), draw(1, 3)
    ph, pw = draw(0, 2), draw(0, 2)
    dh, dw = draw(1, 2), draw(1, 2)
    h, w = input_size(kh, dh, ph, extra), input_size(kw, dw, pw, extra)
    kwargs = dict(stride=pair_or_int(sh, sw), padding=pair_or_int(ph, pw), dilation=pair_or_int(dh, dw))
    return (n, cin, h, w), (cout, cin, kh, kw), rng().random() < 0.6, kwargs


def _check_conv(x_shape, w_shape, bias, kwargs, device):
    inputs = [randn(*x_shape), randn(*w_shape)] + ([randn(w_shape[0])] if bias else [])
    # float32 sums: the weight's gradient adds N * Ho * Wo products per entry
    atol = 1e-4 * max(1.0, math.sqrt(x_shape[0] * x_shape[2] * x_shape[3] / 256))
    out = check_op(lambda *t: conv2d(*t, **kwargs), *inputs, device=device, atol=atol,
                   torch_fn=lambda *t: F.conv2d(*t, **kwargs))[0]
    assert out.shape[:2] == (x_shape[0], w_shape[0]), tag(f"conv2d {x_shape} {w_shape} {kwargs}: {out.shape}")


# ---- conv2d ----
@pytest.mark.parametrize("case", range(8))
def test_conv2d_random(case, device):
    """Fresh shapes and geometry per run; on cpu also float64 finite differences of x, weight and bias."""
    _check_conv(*_conv_case(), device)


@pytest.mark.parametrize("x_shape,w_shape,bias,kwargs", [
    ((1, 1, 5, 5), (1, 1, 3, 3), False, {}),
    ((2, 3, 7, 4), (4, 3, 1, 1), True, {}),                                   # 1x1 kernel, non-square
    ((1, 2, 9, 6), (3, 2, 3, 2), True, dict(stride=2, padding=1)),
    ((3, 1, 8, 11), (2, 1, 5, 4), False, dict(stride=(3, 2), padding=(2, 0), dilation=(1, 2))),
    ((1, 4, 6, 6), (2, 4, 6, 6), True, {}),                                   # kernel == input: 1x1 output
    ((2, 2, 4, 3), (3, 2, 3, 3), True, dict(padding=2, dilation=2)),          # kernel only fits after padding
    ((1, 3, 13, 5), (1, 3, 2, 5), False, dict(stride=3, padding=(0, 2))),     # strides that skip the tail
    ((2, 1, 1, 9), (2, 1, 1, 3), True, dict(stride=(1, 2), dilation=(1, 2))),  # height 1
    ((1, 1, 6, 1), (2, 1, 2, 1), False, dict(padding=(0, 1), dilation=(2, 1))),  # width 1, padded
])
def test_conv2d_fixed(x_shape, w_shape, bias, kwargs, device):
    _check_conv(x_shape, w_shape, bias, kwargs, device)


def test_conv2d_float64_finite_differences():
    """The whole op in float64 on cpu: analytic gradients against central differences at every point."""
    x_shape, w_shape, bias, kwargs = _conv_case(max_kernel=3, extra=3)
    inputs = [randn(*x_shape, dtype=np.float64), randn(*w_shape, dtype=np.float64)]
    if bias:
        inputs.append(randn(w_shape[0], dtype=np.float64))
    finite_difference_check(lambda *t: conv2d(*t, **kwargs), *inputs, points=40)
    out = conv2d(*[wg_tensor(a, "cpu") for a in inputs], **kwargs)
    assert str(out.dtype).endswith("float64"), tag(f"float64 conv2d gave {out.dtype}")
    assert_close(out, F.conv2d(*[torch.from_numpy(a) for a in inputs], **kwargs), atol=1e-12, rtol=1e-12,
                 what="float64 conv2d vs torch")


def test_conv2d_non_contiguous_input(device):
    """The window view must follow the input's own strides and offset (no padding: no copy before it)."""
    check_op(lambda x, w: conv2d(x.transpose(2, 3), w, stride=(2, 1)), randn(2, 3, 7, 6), randn(2, 3, 3, 2),
             device=device, torch_fn=lambda x, w: F.conv2d(x.transpose(2, 3), w, stride=(2, 1)))
    check_op(lambda x, w: conv2d(x[:, 1:, 2:, ::2], w, dilation=2), randn(1, 4, 9, 12), randn(2, 3, 2, 2),
             device=device, torch_fn=lambda x, w: F.conv2d(x[:, 1:, 2:, ::2], w, dilation=2))


def test_conv2d_gradient_of_sum(device):
    """backward from a plain .sum() (an expanded, stride-0 upstream gradient)."""
    x, w, b = randn(2, 2, 6, 5), randn(3, 2, 3, 2), randn(3)
    tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    F.conv2d(tx, tw, tb, stride=2, padding=1).sum().backward()
    gx, gw, gb = (wg_tensor(a, device, requires_grad=True) for a in (x, w, b))
    conv2d(gx, gw, gb, stride=2, padding=1).sum().backward()
    for mine, ref, name in ((gx, tx, "x"), (gw, tw, "weight"), (gb, tb, "bias")):
        assert_close(mine.grad, ref.grad, what=f"{device}: d sum / d {name}")


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_reads_windows_in_place(stride, monkeypatch):
    """Forward is one product with the bias in it (no padded copy, no im2col columns); backward is
    one product per gradient (the input's a product over grad's windows at stride 1) and the
    bias's sum."""
    x = wg_tensor(randn(2, 3, 9, 8), "webgpu", requires_grad=True)
    w = wg_tensor(randn(4, 3, 3, 3), "webgpu", requires_grad=True)
    b = wg_tensor(randn(4), "webgpu", requires_grad=True)
    kernels = dispatched_kernels(monkeypatch)
    out = conv2d(x, w, b, stride=stride, padding=1)
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    out.backward(wg_tensor(randn(*out.shape), "webgpu"))
    expected = 1 + 1 + (1 if stride == 1 else 2) + 1   # forward, weight, input (+ fold), bias
    assert len(kernels) == expected, tag(f"backward took {len(kernels) - 1} dispatches, expected {expected - 1}")


@pytest.mark.parametrize("shape", [((16, 1, 28, 28), (16, 1, 3, 3)), ((8, 16, 14, 14), (32, 16, 3, 3))],
                         ids=["conv1", "conv2"])
def test_conv2d_split_along_k_as_on_a_gpu(shape, monkeypatch):
    """The MNIST CNN's layers with a GPU's rule for splitting K (the weight's gradient sums over the
    batch and every output pixel: few outputs, a long K): against torch."""
    from webgrad.backends.webgpu.kernels import matmul as matmul_kernels
    gpu_rule = matmul_kernels.matmul_splits
    monkeypatch.setattr(matmul_kernels, "matmul_splits", lambda m, n, k, batch, t, is_software: gpu_rule(m, n, k, batch, t, False))
    x_shape, w_shape = shape
    _check_conv(x_shape, w_shape, True, dict(padding=1), "webgpu")


# ---- the window view and its fold ----
def test_windows_is_a_view(device):
    a = randn(2, 3, 6, 5)
    x = wg_tensor(a, device)
    v = windows(x, (3, 2), stride=(2, 1), dilation=(1, 2))
    assert v.shape == (2, 3, 3, 2, 2, 3), tag(f"windows shape {tuple(v.shape)}")
    assert v._storage is x._storage, tag("windows copied its input")
    ref = np.empty((2, 3, 3, 2, 2, 3), np.float32)   # out[n, c, ky, kx, oy, ox] = x[n, c, 2*oy + ky, ox + 2*kx]
    for ky in range(3):
        for kx in range(2):
            ref[:, :, ky, kx] = a[:, :, ky:ky + 3:2, 2 * kx:2 * kx + 3]
    assert_close(v, ref, atol=0, rtol=0, what="windows values")


@pytest.mark.parametrize("case", range(4))
def test_windows_gradient_is_fold(case, device):
    """d/dx of sum(windows(x) * g) adds every window's entry back onto the pixel it read: torch's fold."""
    kh, kw, sh, sw, dh, dw = (draw(1, 3), draw(1, 3), draw(1, 3), draw(1, 3), draw(1, 2), draw(1, 2))
    n, c = draw(1, 2), draw(1, 3)
    h, w = input_size(kh, dh, 0, 5), input_size(kw, dw, 0, 5)

    def torch_windows(t):
        cols = F.unfold(t, (kh, kw), dilation=(dh, dw), stride=(sh, sw))       # (N, C*kh*kw, L)
        ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
        return cols.reshape(n, c, kh, kw, ho, wo)

    check_op(lambda t: windows(t, (kh, kw), (sh, sw), (dh, dw)), randn(n, c, h, w), device=device,
             torch_fn=torch_windows)


# ---- pad ----
@pytest.mark.parametrize("case", range(6))
def test_pad_random(case, device):
    shape = random_shape(1, 4, 5)
    dims = draw(1, len(shape))
    pads = tuple(draw(0, 3) for _ in range(2 * dims))
    value = float(rng().choice([0.0, 1.5, -2.25]))
    check_op(lambda t: pad(t, pads, value), randn(*shape), device=device,
             torch_fn=lambda t: F.pad(t, pads, value=value))


@pytest.mark.parametrize("shape,pads", [
    ((5,), (2, 3)),                         # 1-D pad
    ((3, 4), (1, 0, 0, 2)),                 # 2-D pad
    ((2, 3, 4), (0, 1, 2, 0, 1, 1)),        # 3-D pad
    ((2, 1, 3, 2), (1, 1, 1, 1, 1, 1, 1, 1)),  # 4-D pad: every dim
    ((2, 3, 4), (1, 2)),                    # fewer pads than dims: the last dim only
    ((3, 4), (0, 0, 0, 0)),                 # all zero
    ((1, 1), (3, 3, 3, 3)),
])
def test_pad_fixed(shape, pads, device):
    check_op(lambda t: pad(t, pads, value=-0.5), randn(*shape), device=device,
             torch_fn=lambda t: F.pad(t, pads, value=-0.5))
    check_op(lambda t: pad(t, pads), randn(*shape), device=device, torch_fn=lambda t: F.pad(t, pads))


def test_pad_integer_and_infinite_values(device):
    a = integers(3, 4, low=-50, high=50)
    out = pad(wg_tensor(a, device), (1, 2, 2, 0), value=7)
    assert out.dtype == wg_tensor(a, device).dtype, tag(f"pad changed int32 to {out.dtype}")
    assert_close(out, F.pad(torch.from_numpy(a), (1, 2, 2, 0), value=7), what="int32 pad")
    out = pad(wg_tensor(randn(2, 3), device), (1, 1), value=-np.inf)
    assert np.isneginf(to_numpy(out)[:, [0, -1]]).all() and np.isfinite(to_numpy(out)[:, 1:-1]).all(), tag(
        "-inf pad")


# ---- errors ----   (shapes that cannot convolve are RuntimeErrors, bad arguments ValueErrors: as in torch)
@pytest.mark.parametrize("fn,error,match", [
    (lambda x, w: conv2d(x[0], w), RuntimeError, "4-D|match"),                          # 3-D input
    (lambda x, w: conv2d(x, w[0]), RuntimeError, "match"),                               # 3-D weight
    (lambda x, w: conv2d(x.reshape(2, 3, 36), w), RuntimeError, "match"),
    (lambda x, w: conv2d(x, w[:, :2]), RuntimeError, "to have 2 channels"),             # channel mismatch
    (lambda x, w: conv2d(x[:, :, :2], w), RuntimeError, "larger"),                       # kernel > input height
    (lambda x, w: conv2d(x, w, dilation=(1, 3)), RuntimeError, "larger"),                # dilated kernel > width
    (lambda x, w: conv2d(x, w, padding=-1), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, padding=(1, -2)), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, stride=0), ValueError, "positive"),
    (lambda x, w: conv2d(x, w, dilation=0), ValueError, "positive"),
    (lambda x, w: conv2d(x, w, padding=(1, 2, 3)), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, groups=3), RuntimeError, "groups=3"),                    # 4 filters, 3 groups
    (lambda x, w: max_pool2d(x[0], 2), RuntimeError, "4-D"),
    (lambda x, w: max_pool2d(x, 7), RuntimeError, "larger"),
    (lambda x, w: max_pool2d(x, 2, padding=-1), ValueError, "padding"),
    (lambda x, w: max_pool2d(x, 0), ValueError, "positive"),
    (lambda x, w: avg_pool2d(x.reshape(6, 36), 2), RuntimeError, "4-D"),
    (lambda x, w: avg_pool2d(x, (2, 7)), RuntimeError, "larger"),
    (lambda x, w: avg_pool2d(x, 2, padding=(0, -1)), ValueError, "padding"),
    (lambda x, w: avg_pool2d(x, 2, stride=(1, 0)), ValueError, "positive"),
    (lambda x, w: pad(x, (1,)), ValueError, "pad"),
    (lambda x, w: pad(x, (1, 1, 1)), ValueError, "pad"),
    (lambda x, w: pad(x, (1,) * 10), ValueError, "pad"),                              # 5 dims of pads, 4-D x
    (lambda x, w: pad(x, (1, -1)), ValueError, "non-negative"),
])
def test_errors(fn, error, match, device):
    x, w = wg_tensor(randn(2, 3, 6, 6), device), wg_tensor(randn(4, 3, 3, 3), device)
    with pytest.raises(error, match=match):
        fn(x, w)
