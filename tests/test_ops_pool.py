"""max_pool2d and avg_pool2d (webgrad.ops.conv) against torch.nn.functional, finite differences
(float64, cpu) and webgpu against cpu; max pooling's ties, NaN and indices exactly as torch's CPU
kernel, in one dispatch each way."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import webgrad as wg

from conftest import (assert_close, check_op, dispatched_kernels, distinct, finite_difference_check, integers, randn,
                      rng, tag, to_numpy, wg_tensor)
from webgrad.ops.conv import avg_pool2d, max_pool2d
from window_cases import draw, input_size, pair_or_int


# ---- pooling ----
def _all_padding_window(size, k, s, p, d):
    """Whether some window along one axis reads padding only (dilation can skip every real pixel):
    its max is -inf and torch then routes the gradient to an arbitrary pixel, so no oracle exists."""
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    return any(all(not 0 <= o * s - p + j * d < size for j in range(k)) for o in range(out))


def _pool_case(dilated):
    while True:
        kh, kw = draw(1, 4), draw(1, 4)
        default_stride = rng().random() < 0.25       # stride=None: the kernel size
        sh, sw = (kh, kw) if default_stride else (draw(1, 3), draw(1, 3))
        ph, pw = draw(0, kh // 2), draw(0, kw // 2)     # torch allows at most half the kernel
        dh, dw = (draw(1, 2), draw(1, 2)) if dilated else (1, 1)
        h, w = input_size(kh, dh, ph, 6), input_size(kw, dw, pw, 6)
        if not (_all_padding_window(h, kh, sh, ph, dh) or _all_padding_window(w, kw, sw, pw, dw)):
            break
    stride = None if default_stride else pair_or_int(sh, sw)
    kwargs = dict(kernel_size=pair_or_int(kh, kw), stride=stride, padding=pair_or_int(ph, pw))
    if dilated:
        kwargs["dilation"] = pair_or_int(dh, dw)
    return (draw(1, 3), draw(1, 4), h, w), kwargs


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


APART_POOLS = [
    ((2, 3, 8, 8), dict(kernel_size=2)),                                   # the MNIST CNN's 2x2, stride 2
    ((2, 2, 11, 10), dict(kernel_size=2, stride=(3, 4))),                   # gaps; rows and columns past the last
    ((1, 2, 9, 7), dict(kernel_size=(2, 3), stride=3, padding=1)),          # padded
    ((1, 2, 10, 9), dict(kernel_size=2, stride=(3, 4), dilation=(2, 3))),   # dilated taps within the stride
]


@pytest.mark.parametrize("software", [True, False])
@pytest.mark.parametrize("spec", APART_POOLS)
def test_max_pool2d_windows_apart_backward_both_forms(spec, software, monkeypatch):
    """Windows that do not overlap: a software adapter's backward takes a thread per window's cell,
    a GPU's a thread per pixel; both exactly torch's (ties, NaN and zeros outside the windows)."""
    backend = wg.get_backend("webgpu")
    monkeypatch.setattr(backend, "is_software", software)
    keys, pipeline = [], backend.runtime.pipeline
    monkeypatch.setattr(backend.runtime, "pipeline", lambda key, *args, **kw: keys.append(key) or pipeline(key, *args, **kw))
    shape, kwargs = spec
    x = rng().choice(np.float32([np.nan, -1, 0, 1, 2]), shape, p=[0.1, 0.2, 0.3, 0.2, 0.2])
    _max_pool_like_torch(x, kwargs, "webgpu")
    entry = "max_backward_apart" if software else "max_backward"
    assert [key[1] for key in keys if key[0] == "pool"] == ["max_forward", entry], tag(f"pool kernels {keys}")


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
    """int32 and uint8 (packed four to a word on the GPU) pools on both devices, padding included (it is
    never picked)."""
    a = integers(2, 3, 7, 6, low=-5, high=5)
    kwargs = dict(kernel_size=3, stride=2, padding=1)
    out, at = max_pool2d(wg_tensor(a, device), **kwargs, return_indices=True)
    want, want_at = F.max_pool2d(torch.from_numpy(a), **kwargs, return_indices=True)
    assert out.dtype is wg.int32, tag(f"{device}: int32 max_pool2d gave {out.dtype}")
    assert_close(out, want, what=f"{device}: int32 values")
    assert_close(at, want_at, what=f"{device}: int32 indices")
    small = integers(1, 2, 5, 7, high=256).astype(np.uint8)
    out, at = max_pool2d(wg_tensor(small, device).transpose(2, 3), 2, return_indices=True)
    want, want_at = F.max_pool2d(torch.from_numpy(small).transpose(2, 3), 2, return_indices=True)
    assert out.dtype is wg.uint8, tag(f"{device}: uint8 max_pool2d gave {out.dtype}")
    assert_close(out, want, what=f"{device}: uint8 values")
    assert_close(at, want_at, what=f"{device}: uint8 indices")


@pytest.mark.parametrize("padding", [0, 1])
def test_max_pool2d_is_one_dispatch_each_way(padding, monkeypatch):
    """Forward is one kernel (no padded copy first), backward one (the window view's took six)."""
    kernels = dispatched_kernels(monkeypatch)
    x = wg_tensor(randn(2, 3, 9, 8), "webgpu", requires_grad=True)
    out = max_pool2d(x, 2, padding=padding)
    assert len(kernels) == 1, tag(f"forward took {len(kernels)} dispatches")
    g = wg_tensor(randn(*out.shape), "webgpu")
    out.backward(g)
    assert len(kernels) == 2, tag(f"backward took {len(kernels) - 1} dispatches")
