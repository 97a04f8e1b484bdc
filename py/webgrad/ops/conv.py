"""Convolution and pooling on (N, C, H, W) inputs. Convolution is an implicit GEMM: the backend's
matmul kernel reads the input's sliding windows in place (padding as zeros), so there is no im2col
copy, grouped convolutions included (a product per group, batched in one dispatch). Average
pooling reads the windows as an (N, C, kh, kw, Ho, Wo) strided view of the same storage and takes
the mean over the window dims; the view's gradient is `fold` (shaders/fold.wgsl), which sums the
overlapping windows back. Max pooling has its own kernels (shaders/pool.wgsl), one dispatch each
way: forward keeps the index each window picked, backward sends the gradient there."""
from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .creation import full
from ..dtypes import TYPE_NAMES
from .movement import _as_view, _slice_view, write_into
from .half import computes_in_float32
from .._tensor import Tensor


def _pair(value, name):
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(v, int) or v < 0 for v in pair):
        raise ValueError(f"{name} must be an int or a pair of non-negative ints, got {value!r}")
    return pair


class _Windows(Function):
    def forward(self, x, kernel, stride, dilation, out_size):
        (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_size
        n, c = x.shape[:2]
        s = x._strides
        self.in_shape, self.geometry = x.shape, (kernel, stride, dilation)
        return _as_view(x, (n, c, kh, kw, ho, wo), (s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw),
                        x._offset)

    def backward(self, grad):
        storage = grad.backend.fold(grad._view, self.in_shape, *self.geometry)
        return Tensor(storage, self.in_shape, grad.dtype, grad.device)


def _window_geometry(x, kernel_size, stride, dilation, padding=(0, 0), ceil_mode=False):
    """Checked (kernel, stride, dilation) pairs and the (Ho, Wo) of the sliding windows over x,
    padded by `padding` on both sides. ceil_mode (pooling) adds a last window that overhangs the
    padded end where the stride does not divide evenly, if it starts inside the input or the left
    padding (PyTorch's rule)."""
    if x.ndim != 4:
        raise RuntimeError(f"expected a 4-D (N, C, H, W) input, got shape {tuple(x.shape)}")
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None else _pair(stride, "stride")
    dilation = _pair(dilation, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ValueError("kernel_size, stride and dilation must be positive")
    sizes = [size + 2 * p for size, p in zip(x.shape[2:], padding)]
    for size, k, d, name in zip(sizes, kernel, dilation, ("height", "width")):
        if d * (k - 1) + 1 > size:
            raise RuntimeError(f"kernel {kernel} (dilation {dilation}) is larger than the input {name} {size}")
    out_size = []
    for size, k, s, d, p in zip(sizes, kernel, stride, dilation, padding):
        count = (size - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        out_size.append(count - 1 if ceil_mode and (count - 1) * s >= size - p else count)
    return kernel, stride, dilation, tuple(out_size)


@computes_in_float32
def windows(x, kernel_size, stride=None, dilation=1):
    """The (N, C, kh, kw, Ho, Wo) view of x's sliding windows (no copy)."""
    return _Windows.apply(x, *_window_geometry(x, kernel_size, stride, dilation))


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


class _Conv2d(Function):
    """Implicit-GEMM convolution: the backend's product reads the input's windows in place (no
    im2col copy, padding read as zeros); the input's gradient is a product over grad's windows
    (stride 1) or columns folded back (larger strides, whose windows do not map linearly back). With
    groups, every group's product is one dispatch all the same (a batch dim of the backend's products)."""

    def forward(self, x, weight, bias, stride, padding, dilation, groups, out_size):
        self.x, self.weight, self.bias, self.geometry = x, weight, bias, (stride, padding, dilation)
        self.groups = groups
        shape = (x.shape[0], weight.shape[0], *out_size)
        storage = x.backend.conv2d(x._view, weight._view, None if bias is None else bias._view, stride, padding,
                                   dilation, groups)
        return Tensor(storage, shape, x.dtype, x.device)

    def backward(self, grad):
        x, weight, bias = self.x, self.weight, self.bias
        stride, padding, dilation = self.geometry
        grad, backend, g = grad.contiguous(), grad.backend, self.groups
        gx = gw = gb = None
        if x.requires_grad:
            if stride == (1, 1):
                gx = backend.conv2d_input_grad(grad._view, weight._view, x.shape, padding, dilation, g)
            else:   # each group's columns: its filters' transpose times its channels of grad
                (n, co, ho, wo), (_, c, kh, kw) = grad.shape, weight.shape
                cols = weight.reshape(g, co // g, c * kh * kw).mT @ grad.reshape(n, g, co // g, ho * wo)
                windows = cols.reshape(n, g * c, kh, kw, ho, wo)._view
                gx = backend.fold(windows, x.shape, (kh, kw), stride, dilation, padding)
            gx = Tensor(gx, x.shape, x.dtype, x.device)
        if weight.requires_grad:
            gw = Tensor(backend.conv2d_weight_grad(grad._view, x._view, weight.shape[2:], stride, padding, dilation, g),
                        weight.shape, weight.dtype, weight.device)
        if bias is not None and bias.requires_grad:
            gb = grad.sum((0, 2, 3))
        return gx, gw, gb


@autocast_op
@computes_in_float32
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d; weight (C_out, C / groups, kh, kw): with groups > 1 the channels
    split into that many groups, each convolved with its C_out / groups filters."""
    if weight.ndim != 4 or x.ndim != 4:
        raise RuntimeError(f"conv2d: input {tuple(x.shape)} and weight {tuple(weight.shape)} do not match "
                           "(expected 4-D (N, C, H, W) and (C_out, C, kh, kw))")
    check_groups(x, weight, groups)
    if x.device != weight.device or x.dtype is not weight.dtype or not x.dtype.is_floating_point:
        raise RuntimeError(f"conv2d: input and weight must be floating point tensors of one dtype on one device, "
                           f"got {x.dtype.name} on {x.device} and {weight.dtype.name} on {weight.device}")
    if bias is not None and (bias.shape != (weight.shape[0],) or bias.device != x.device or bias.dtype is not x.dtype):
        raise RuntimeError(f"conv2d: bias must be a {x.dtype.name} tensor of shape ({weight.shape[0]},) on "
                           f"{x.device}, got {bias.dtype.name} {tuple(bias.shape)} on {bias.device}")
    padding = _pair(padding, "padding")
    kernel, stride, dilation, out_size = _window_geometry(x, weight.shape[2:], stride, dilation, padding)
    if groups > 1 and bias is not None:   # the products' bias is one per row, the same in every group
        return _Conv2d.apply(x, weight.contiguous(), None, stride, padding, dilation, groups, out_size) + \
            bias.reshape(1, -1, 1, 1)
    return _Conv2d.apply(x, weight.contiguous(), bias, stride, padding, dilation, groups, out_size)


def check_group_count(weight, groups):
    """PyTorch's checks (and messages) of a convolution's groups against its weight's dim 0."""
    if not isinstance(groups, int) or groups < 1:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size [{list(weight.shape)}] instead")


def check_groups(x, weight, groups):
    """PyTorch's checks (and messages) of a convolution's groups against its input and weight."""
    check_group_count(weight, groups)
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(x.shape)} to have {weight.shape[1] * groups} channels, but got {x.shape[1]} "
                           "channels instead")


def check_pool_padding(kernel_size, padding):
    """Pooling pads at most half a kernel (PyTorch's rule): a window must see a real pixel."""
    (kh, kw), (ph, pw) = _pair(kernel_size, "kernel_size"), _pair(padding, "padding")
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"pad should be at most half of kernel size, but got pad={padding}, "
                         f"kernel_size={kernel_size}")
    return ph, pw


class _MaxPool2d(Function):
    """Max pooling's gradient: each window's gradient goes to the element the window picked, in one
    kernel (backend.max_pool2d_backward). forward is handed the pool kernel's values and indices by
    max_pool2d, which can then return the indices too (a Function has one output)."""

    def forward(self, x, values, indices, geometry):
        self.in_shape, self.indices, self.geometry = x.shape, indices, geometry
        return values

    def backward(self, grad):
        storage = grad.backend.max_pool2d_backward(grad._view, self.indices._view, self.in_shape, *self.geometry)
        return Tensor(storage, self.in_shape, grad.dtype, grad.device)


@computes_in_float32
def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool2d. With return_indices, also each output's position y * W + x in
    its input plane, as int32 (torch gives int64, which webgrad does not have). Each window picks
    what PyTorch's CPU kernel picks: its first maximum in window order, or its last NaN if it has one."""
    padding = check_pool_padding(kernel_size, padding)
    kernel, stride, dilation, out_size = _window_geometry(x, kernel_size, stride, dilation, padding, ceil_mode)
    geometry = (kernel, stride, padding, dilation)
    shape = (*x.shape[:2], *out_size)
    values, indices = x.backend.max_pool2d(x._view, shape, *geometry)
    indices = Tensor(indices, shape, dtypes.int32, x.device)
    out = _MaxPool2d.apply(x, Tensor(values, shape, x.dtype, x.device), indices, geometry)
    return (out, indices) if return_indices else out


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """Mean over each window: its sum over kh * kw (zero padding counted), over the real pixels it
    covers (count_include_pad=False) or over divisor_override. With ceil_mode, the last windows may
    overhang the padding; what they overhang is never counted (PyTorch's rule). Integer input (int32,
    standing for torch's int64) averages to an integer rounded toward zero, as torch's; uint8 and bool
    raise, as torch's."""
    if x.dtype in (dtypes.uint8, dtypes.bool_):
        raise NotImplementedError(f'"avg_pool2d" not implemented for \'{TYPE_NAMES[x.dtype.name]}\'')
    if divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    ph, pw = check_pool_padding(kernel_size, padding)
    kernel, stride, _, (ho, wo) = _window_geometry(x, kernel_size, stride, 1, (ph, pw), ceil_mode)
    (kh, kw), (sh, sw), (h, w) = kernel, stride, x.shape[2:]
    eh, ew = max((ho - 1) * sh + kh - h - 2 * ph, 0), max((wo - 1) * sw + kw - w - 2 * pw, 0)   # the overhang
    cells = windows(pad(x, (pw, pw + ew, ph, ph + eh)), kernel, stride)
    counted = (count_include_pad or not (ph or pw)) and not (eh or ew)   # every window divides by kh * kw
    if x.dtype.is_floating_point and counted and divisor_override is None:
        return cells.mean((2, 3))
    if divisor_override is not None or counted:
        divisor = divisor_override or kh * kw
    else:   # how many of the padded input's (count_include_pad) or the input's pixels each window covers
        (bh, bw) = (0, 0) if count_include_pad else (ph, pw)
        ones = full((1, 1, h + 2 * (ph - bh), w + 2 * (pw - bw)), 1, dtype=x.dtype, device=x.device)
        divisor = windows(pad(ones, (bw, bw + ew, bh, bh + eh)), kernel, stride).sum((2, 3))
    sums = cells.sum((2, 3))
    return sums / divisor if x.dtype.is_floating_point else sums.div(divisor, rounding_mode="trunc")
