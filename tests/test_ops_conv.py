"""conv2d, max_pool2d, avg_pool2d and pad (webgrad.ops.conv) against torch.nn.functional, finite
differences (float64, cpu) and webgpu against cpu; the sliding-window view and its fold gradient;
max pooling's ties, NaN and indices exactly as torch's CPU kernel, in one dispatch each way."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import webgrad as wg

from conftest import (assert_close, check_op, distinct, finite_difference_check, integers, randn, random_shape, rng,
                      tag, to_numpy, wg_tensor)
from webgrad.ops.conv import avg_pool2d, conv2d, max_pool2d, pad, windows


def _draw(low, high):
    return int(rng().integers(low, high + 1))


def _pair_or_int(a, b):
    """(a, b), or a lone int when both are equal half of the time: both spellings must work."""
    return a if a == b and rng().random() < 0.5 else (a, b)


def _size(k, d, p, extra):
    """An input size that fits a kernel k with dilation d after padding p on both sides, plus up to `extra`."""
    need = max(1, d * (k - 1) + 1 - 2 * p)
    return need + _draw(0, extra)


def _conv_case(max_kernel=5, extra=6):
    n, cin, cout = _draw(1, 3), _draw(1, 4), _draw(1, 4)
    kh, kw = _draw(1, max_kernel), _draw(1, max_kernel)
    sh, sw = _draw(1, 3), _draw(1, 3)
    ph, pw = _draw(0, 2), _draw(0, 2)
    dh, dw = _draw(1, 2), _draw(1, 2)
    h, w = _size(kh, dh, ph, extra), _size(kw, dw, pw, extra)
    kwargs = dict(stride=_pair_or_int(sh, sw), padding=_pair_or_int(ph, pw), dilation=_pair_or_int(dh, dw))
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


# ---- pooling ----
def _all_padding_window(size, k, s, p, d):
    """Whether some window along one axis reads padding only (dilation can skip every real pixel):
    its max is -inf and torch then routes the gradient to an arbitrary pixel, so no oracle exists."""
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    return any(all(not 0 <= o * s - p + j * d < size for j in range(k)) for o in range(out))


def _pool_case(dilated):
    while True:
        kh, kw = _draw(1, 4), _draw(1, 4)
        default_stride = rng().random() < 0.25       # stride=None: the kernel size
        sh, sw = (kh, kw) if default_stride else (_draw(1, 3), _draw(1, 3))
        ph, pw = _draw(0, kh // 2), _draw(0, kw // 2)     # torch allows at most half the kernel
        dh, dw = (_draw(1, 2), _draw(1, 2)) if dilated else (1, 1)
        h, w = _size(kh, dh, ph, 6), _size(kw, dw, pw, 6)
        if not (_all_padding_window(h, kh, sh, ph, dh) or _all_padding_window(w, kw, sw, pw, dw)):
            break
    stride = None if default_stride else _pair_or_int(sh, sw)
    kwargs = dict(kernel_size=_pair_or_int(kh, kw), stride=stride, padding=_pair_or_int(ph, pw))
    if dilated:
        kwargs["dilation"] = _pair_or_int(dh, dw)
    return (_draw(1, 3), _draw(1, 4), h, w), kwargs


@pytest.mark.parametrize("case", range(6))
def test_max_pool2d_random(case, device):
    shape, kwargs = _pool_case(dilated=True)
    check_op(lambda x: max_pool2d(x, **kwargs), distinct(*shape), device=device,
             torch_fn=lambda x: F.max_pool2d(x, **kwargs))


@pytest.mark.parametrize("case", range(6))
def test_avg_pool2d_random(case, device):
    shape, kwargs = _pool_case(dilated=False)
    check_op(lambda x: avg_pool2d(x, **kwargs), randn(*shape), device=device,
             torch_fn=lambda x: F.avg_pool2d(x, **kwargs))


POOLS = [
    ((1, 1, 4, 4), dict(kernel_size=2)),                              # stride defaults to the kernel
    ((2, 3, 7, 5), dict(kernel_size=3, stride=1)),                    # overlapping windows
    ((1, 2, 9, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=1)),  # overlapping, padded
    ((2, 1, 5, 6), dict(kernel_size=(2, 4), stride=(3, 1), padding=(1, 2))),
    ((1, 2, 6, 6), dict(kernel_size=5, stride=2, padding=2)),          # windows of mostly padding
    ((1, 1, 3, 7), dict(kernel_size=3, stride=(1, 2))),                # kernel == height
]


@pytest.mark.parametrize("shape,kwargs", POOLS)
def test_max_pool2d_fixed(shape, kwargs, device):
    check_op(lambda x: max_pool2d(x, **kwargs), distinct(*shape), device=device,
             torch_fn=lambda x: F.max_pool2d(x, **kwargs))


@pytest.mark.parametrize("shape,kwargs", POOLS)
def test_avg_pool2d_fixed(shape, kwargs, device):
    check_op(lambda x: avg_pool2d(x, **kwargs), randn(*shape), device=device,
             torch_fn=lambda x: F.avg_pool2d(x, **kwargs))


def test_max_pool2d_dilated_and_negative_inputs(device):
    """All-negative inputs: a zero-padded max would win; the padding must be -inf."""
    x = -np.abs(distinct(2, 2, 8, 7)) - 1
    kwargs = dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1))
    check_op(lambda t: max_pool2d(t, **kwargs), x, device=device, torch_fn=lambda t: F.max_pool2d(t, **kwargs))


def test_pool_non_contiguous_input_and_sum_gradient(device):
    """Pooling a strided, offset view, then backward from .sum() (a stride-0 upstream into fold)."""
    x = distinct(2, 3, 9, 10)
    for pool, ref, kwargs in ((max_pool2d, F.max_pool2d, dict(kernel_size=3, stride=1)),
                              (avg_pool2d, F.avg_pool2d, dict(kernel_size=2, stride=1, padding=1))):
        tx = torch.from_numpy(x).requires_grad_()
        expected = ref(tx[:, 1:, 1:, ::2].transpose(2, 3), **kwargs)
        expected.sum().backward()
        gx = wg_tensor(x, device, requires_grad=True)
        out = pool(gx[:, 1:, 1:, ::2].transpose(2, 3), **kwargs)
        assert_close(out, expected, what=f"{device} {pool.__name__} of a view")
        out.sum().backward()
        assert_close(gx.grad, tx.grad, what=f"{device} {pool.__name__}: gradient through the view")


def test_pool_float64_finite_differences():
    shape, kwargs = _pool_case(dilated=True)
    finite_difference_check(lambda t: max_pool2d(t, **kwargs), distinct(*shape).astype(np.float64), points=30)
    shape, kwargs = _pool_case(dilated=False)
    finite_difference_check(lambda t: avg_pool2d(t, **kwargs), randn(*shape, dtype=np.float64), points=30)


# ---- max pooling exactly as torch's CPU kernel ----
EXACT_POOLS = [
    ((2, 3, 7, 9), dict(kernel_size=3, stride=1)),                               # overlapping windows
    ((1, 2, 9, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=1)),          # overlapping, padded
    ((2, 2, 11, 10), dict(kernel_size=2, stride=(3, 4))),                         # stride > kernel: gaps
    ((1, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1))),   # dilated, padded
    ((1, 1, 5, 13), dict(kernel_size=(5, 3), stride=(1, 2), padding=(2, 1))),    # windows of mostly padding
    "random", "random", "random",
]


def _max_pool_like_torch(x, spec, device, view=lambda t: t):
    """max_pool2d(view(x), return_indices=True) and the gradient from a random upstream g against
    torch's CPU max_pool2d, exactly: values (NaN where torch has NaN), indices, and the gradient bit
    for bit (a tie goes to the element torch picks, and each pixel sums its windows in torch's order)."""
    tx = torch.from_numpy(x).requires_grad_()
    want, want_at = F.max_pool2d(view(tx), **spec, return_indices=True)
    g = randn(*want.shape)
    want.backward(torch.from_numpy(g))
    gx = wg_tensor(x, device, requires_grad=True)
    out, at = max_pool2d(view(gx), **spec, return_indices=True)
    out.backward(wg_tensor(g, device))
    assert at.dtype is wg.int32 and not at.requires_grad, tag(f"indices: {at.dtype}")
    for mine, ref, what in ((out, want, "values"), (at, want_at, "indices"), (gx.grad, tx.grad, "gradient")):
        np.testing.assert_array_equal(to_numpy(mine), to_numpy(ref), err_msg=tag(f"{device} {spec}: {what}"))


def _exact_case(spec):
    return _pool_case(dilated=True) if spec == "random" else spec


@pytest.mark.parametrize("spec", EXACT_POOLS)
def test_max_pool2d_ties_match_torch_exactly(spec, device):
    """Five levels (-inf among them): most windows hold several maxima. The input is a strided,
    offset, transposed view, which the kernel reads without a copy."""
    (n, c, h, w), kwargs = _exact_case(spec)
    levels = rng().choice(np.float32([-np.inf, -1, 0, 1, 2]), (n, c + 1, w, 2 * h), p=[0.1, 0.2, 0.3, 0.2, 0.2])
    _max_pool_like_torch(levels, kwargs, device, view=lambda t: t[:, 1:, :, ::2].transpose(2, 3))


@pytest.mark.parametrize("spec", EXACT_POOLS)
def test_max_pool2d_nan_matches_torch_exactly(spec, device):
    """NaN is picked over any number, and the last NaN in window order over earlier ones (torch's CPU
    rule); its window's gradient goes there."""
    shape, kwargs = _exact_case(spec)
    x = np.round(randn(*shape))
    x[rng().random(shape) < 0.2] = np.nan
    _max_pool_like_torch(x, kwargs, device)


def test_max_pool2d_window_of_padding_only(device):
    """Dilation can step over every real pixel of a padded window (here: rows -1 and 2 of a 2-row
    input). Such a window is -inf, as in torch, with index -1 (torch's lies outside the plane), and
    sends no gradient."""
    x = wg_tensor(randn(1, 2, 2, 5), device, requires_grad=True)
    kwargs = dict(kernel_size=2, stride=1, padding=1, dilation=(3, 1))
    out, at = max_pool2d(x, **kwargs, return_indices=True)
    assert_close(out, F.max_pool2d(torch.zeros(1, 2, 2, 5), **kwargs), what=f"{device}: values")
    assert (to_numpy(at) == -1).all(), tag(f"{device}: indices {to_numpy(at)}")
    out.sum().backward()
    assert not to_numpy(x.grad).any(), tag(f"{device}: gradient {to_numpy(x.grad)}")


def test_max_pool2d_integer_input(device):
    """int32 pools on both devices, padding included (it is never picked); uint8, packed four to a word
    on the GPU, only on cpu."""
    a = integers(2, 3, 7, 6, low=-5, high=5)
    kwargs = dict(kernel_size=3, stride=2, padding=1)
    out, at = max_pool2d(wg_tensor(a, device), **kwargs, return_indices=True)
    want, want_at = F.max_pool2d(torch.from_numpy(a), **kwargs, return_indices=True)
    assert out.dtype is wg.int32, tag(f"{device}: int32 max_pool2d gave {out.dtype}")
    assert_close(out, want, what=f"{device}: int32 values")
    assert_close(at, want_at, what=f"{device}: int32 indices")
    small = integers(1, 2, 5, 5, high=256).astype(np.uint8)
    if device == "webgpu":
        with pytest.raises(TypeError, match="uint8"):
            max_pool2d(wg_tensor(small, device), 2)
    else:
        assert_close(max_pool2d(wg_tensor(small, device), 2), F.max_pool2d(torch.from_numpy(small), 2),
                     what="uint8 values")


def _count_dispatches(monkeypatch):
    runtime = wg.get_backend("webgpu").runtime
    kernels = []
    dispatch = runtime.dispatch

    def counted(pipeline, *args, **kwargs):
        kernels.append(pipeline)
        return dispatch(pipeline, *args, **kwargs)
    monkeypatch.setattr(runtime, "dispatch", counted)
    return kernels


@pytest.mark.parametrize("padding", [0, 1])
def test_max_pool2d_is_one_dispatch_each_way(padding, monkeypatch):
    """Forward is one kernel (no padded copy first), backward one (the window view's took six)."""
    kernels = _count_dispatches(monkeypatch)
    x = wg_tensor(randn(2, 3, 9, 8), "webgpu", requires_grad=True)
    out = max_pool2d(x, 2, padding=padding)
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    g = wg_tensor(randn(*out.shape), "webgpu")
    out.backward(g)
    assert len(kernels) == 2, tag(f"backward took {len(kernels) - 1} dispatches")


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_reads_windows_in_place(stride, monkeypatch):
    """Forward is one product with the bias in it (no padded copy, no im2col columns); backward is
    one product per gradient (the input's a product over grad's windows at stride 1) and the
    bias's sum."""
    x = wg_tensor(randn(2, 3, 9, 8), "webgpu", requires_grad=True)
    w = wg_tensor(randn(4, 3, 3, 3), "webgpu", requires_grad=True)
    b = wg_tensor(randn(4), "webgpu", requires_grad=True)
    kernels = _count_dispatches(monkeypatch)
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
    kh, kw, sh, sw, dh, dw = (_draw(1, 3), _draw(1, 3), _draw(1, 3), _draw(1, 3), _draw(1, 2), _draw(1, 2))
    n, c = _draw(1, 2), _draw(1, 3)
    h, w = _size(kh, dh, 0, 5), _size(kw, dw, 0, 5)

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
    dims = _draw(1, len(shape))
    pads = tuple(_draw(0, 3) for _ in range(2 * dims))
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
    (lambda x, w: conv2d(x, w[:, :2]), RuntimeError, "match"),                          # channel mismatch
    (lambda x, w: conv2d(x[:, :, :2], w), RuntimeError, "larger"),                       # kernel > input height
    (lambda x, w: conv2d(x, w, dilation=(1, 3)), RuntimeError, "larger"),                # dilated kernel > width
    (lambda x, w: conv2d(x, w, padding=-1), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, padding=(1, -2)), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, stride=0), ValueError, "positive"),
    (lambda x, w: conv2d(x, w, dilation=0), ValueError, "positive"),
    (lambda x, w: conv2d(x, w, padding=(1, 2, 3)), ValueError, "padding"),
    (lambda x, w: conv2d(x, w, groups=3), NotImplementedError, "groups"),
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
