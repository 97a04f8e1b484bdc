"""Convolution, pooling and dropout layers, with torch.nn's names, arguments, state_dict names
and reprs. The maths is webgrad.ops.conv (products that read the input's sliding windows in place,
a group a batch of them; pooling has kernels of its own)."""
import math

from ..ops.conv import _pair, check_pool_padding
from ..ops.creation import empty
from . import functional as F
from . import init
from .module import Module, Parameter


def check_conv_channels(in_channels, out_channels, groups):
    """torch.nn's checks of a convolution layer's groups (ValueErrors, with its messages)."""
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")


def conv_padding(padding, stride, as_tuple):
    """A convolution layer's padding: 'valid' or 'same' (unstrided only), as torch.nn checks them, or
    as_tuple(padding)."""
    if not isinstance(padding, str):
        return as_tuple(padding)
    if padding not in ("valid", "same"):
        raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
    if padding == "same" and any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    return padding


def add_conv_parameters(module, weight_shape, out_channels, bias, device, dtype):
    """A convolution layer's weight (weight_shape) and bias (out_channels, or None), initialised."""
    module.weight = Parameter(empty(weight_shape, device=device, dtype=dtype))
    module.register_parameter("bias", Parameter(empty(out_channels, device=device, dtype=dtype)) if bias else None)
    module.reset_parameters()


def reset_conv_parameters(weight, bias):
    """torch.nn's initialisation of a convolution's weight and bias: kaiming_uniform_(a=sqrt(5)), and the
    bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in the weight's dim 1 times its kernel's size."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = init._calculate_fan_in_and_fan_out(weight)[0]
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Conv2d(Module):
    """2-D convolution of an (N, C_in, H, W) input; weight (C_out, C_in, kh, kw), bias (C_out,).

    padding is an int, a pair, 'valid' (none) or 'same' (stride 1: the output keeps H and W; an
    even kernel puts the extra row and column after, as PyTorch does). Initialised as PyTorch
    does: kaiming_uniform_(a=sqrt(5)), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
    fan_in = C_in / groups * kh * kw, and the bias from the same bound. groups splits the channels into
    that many groups convolved apart (groups = C_in: depthwise); the weight is then
    (C_out, C_in / groups, kh, kw)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        check_conv_channels(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: padding_mode={padding_mode!r} is not supported; only 'zeros'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride, self.dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
        self.padding = conv_padding(padding, self.stride, lambda p: _pair(p, "padding"))
        self.groups, self.padding_mode = groups, padding_mode
        add_conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias,
                            device, dtype)

    def reset_parameters(self):
        reset_conv_parameters(self.weight, self.bias)

    def _explicit_padding(self):
        """(left, right, top, bottom) for F.pad when padding is 'same' or 'valid', else None."""
        if self.padding == "valid":
            return (0, 0, 0, 0)
        if self.padding == "same":
            (kh, kw), (dh, dw) = self.kernel_size, self.dilation
            th, tw = dh * (kh - 1), dw * (kw - 1)
            return (tw // 2, tw - tw // 2, th // 2, th - th // 2)
        return None

    def forward(self, input):
        widths = self._explicit_padding()
        if widths is None:
            return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return F.conv2d(F.pad(input, widths), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self):
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class MaxPool2d(Module):
    """Max over kh x kw windows (stride defaults to the kernel size); padding is never picked. With
    return_indices, forward gives (values, int32 indices) as F.max_pool2d does."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode
        check_pool_padding(kernel_size, padding)

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Mean over kh x kw windows (F.avg_pool2d)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override
        check_pool_padding(kernel_size, padding)

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        if inplace:
            raise NotImplementedError(f"{type(self).__name__}: inplace=True is not supported")
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability p and scale the rest by 1/(1-p); identity in eval."""

    def forward(self, input):
        return F.dropout(input, self.p, self.training)


class Dropout1d(_DropoutNd):
    """In training, zero whole channels of an (N, C, L) or (C, L) input and scale the rest by 1/(1-p)."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    """In training, zero whole channels of an (N, C, H, W) input and scale the rest by 1/(1-p)."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    """In training, zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training)
