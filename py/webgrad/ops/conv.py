"""Convolution and pooling, built from one view: the sliding windows of an (N, C, H, W) input as
an (N, C, kh, kw, Ho, Wo) strided view of the same storage. Convolution copies the windows into
columns and multiplies by the weight (im2col + matmul); pooling reduces the window dims. The
view's gradient is `fold` (shaders/fold.wgsl), which sums the overlapping windows back."""
import math

from ..autograd import Function
from .creation import full
from .matmul import matmul_with_bias
from .movement import _as_view, _slice_view, write_into
from .._tensor import Tensor


def _pair(value, name):
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(v, int) or v < 0 for v in pair):
        raise ValueError(f"{name} must be an int or a pair of non-negative ints, got {value!r}")
    return pair


class _Windows(Function):
    def forward(self, x, kernel, stride, dilation):
        (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
        n, c, h, w = x.shape
        ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
        s = x._strides
        self.in_shape, self.geometry = x.shape, (kernel, stride, dilation)
        return _as_view(x, (n, c, kh, kw, ho, wo), (s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw),
                        x._offset)

    def backward(self, grad):
        storage = grad.backend.fold(grad, self.in_shape, *self.geometry)
        return Tensor(storage, self.in_shape, grad.dtype, grad.device)


def windows(x, kernel_size, stride=None, dilation=1):
    """The (N, C, kh, kw, Ho, Wo) view of x's sliding windows (no copy)."""
    if x.ndim != 4:
        raise RuntimeError(f"expected a 4-D (N, C, H, W) input, got shape {tuple(x.shape)}")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None else _pair(stride, "stride")
    dilation = _pair(dilation, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ValueError("kernel_size, stride and dilation must be positive")
    for size, k, d, name in zip(x.shape[2:], kernel, dilation, ("height", "width")):
        if d * (k - 1) + 1 > size:
            raise RuntimeError(f"kernel {kernel} (dilation {dilation}) is larger than the input {name} {size}")
    return _Windows.apply(x, kernel, stride, dilation)


class _Pad(Function):
    def forward(self, x, widths, value):
        self.box = tuple((before, size) for (before, _), size in zip(widths, x.shape))
        out = full(tuple(s + a + b for s, (a, b) in zip(x.shape, widths)), value, dtype=x.dtype, device=x.device)
        write_into(self._inner(out), x)
        return out

    def _inner(self, t):
        return _slice_view(t, [a for a, _ in self.box], tuple(s for _, s in self.box), (1,) * t.ndim)

    def backward(self, grad):
        return self._inner(grad)


def pad(x, pad, value=0.0):
    """torch.nn.functional.pad, constant mode: pad = (last_left, last_right, prev_left, prev_right, ...)."""
    if len(pad) % 2 or len(pad) // 2 > x.ndim or any(p < 0 for p in pad):
        raise ValueError(f"pad must be non-negative (before, after) pairs for at most {x.ndim} dims, got {pad}")
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return x if not any(pad) else _Pad.apply(x, tuple(widths), value)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if groups != 1:
        raise NotImplementedError("conv2d: groups other than 1 are not supported yet")
    if weight.ndim != 4 or x.ndim != 4:
        raise RuntimeError(f"conv2d: input {tuple(x.shape)} and weight {tuple(weight.shape)} do not match "
                           "(expected 4-D (N, C, H, W) and (C_out, C, kh, kw))")
    if x.shape[1] != weight.shape[1]:
        raise RuntimeError(f"conv2d: input {tuple(x.shape)} and weight {tuple(weight.shape)} do not match: "
                           f"expected {weight.shape[1]} channels, got {x.shape[1]}")
    ph, pw = _pair(padding, "padding")
    cols = windows(pad(x, (pw, pw, ph, ph)), weight.shape[2:], stride, dilation)
    n, c, kh, kw, ho, wo = cols.shape
    out = matmul_with_bias(weight.reshape(weight.shape[0], c * kh * kw), cols.reshape(n, c * kh * kw, ho * wo),
                           bias, bias_dim=-2)
    return out.reshape(n, weight.shape[0], ho, wo)


def check_pool_padding(kernel_size, padding):
    """Pooling pads at most half a kernel (PyTorch's rule): a window must see a real pixel."""
    (kh, kw), (ph, pw) = _pair(kernel_size, "kernel_size"), _pair(padding, "padding")
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"pad should be at most half of kernel size, but got pad={padding}, "
                         f"kernel_size={kernel_size}")
    return ph, pw


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1):
    ph, pw = check_pool_padding(kernel_size, padding)
    return windows(pad(x, (pw, pw, ph, ph), -math.inf), kernel_size, stride, dilation).amax((2, 3))


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    ph, pw = check_pool_padding(kernel_size, padding)
    return windows(pad(x, (pw, pw, ph, ph)), kernel_size, stride).mean((2, 3))
