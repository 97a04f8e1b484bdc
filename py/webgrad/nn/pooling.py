"""Conv1d, 1-D pooling and adaptive pooling layers, with torch.nn's names, arguments, state_dict
names and reprs. The maths is webgrad.ops.conv1d (the 2-D kernels over (N, C, 1, L)) and
ops.resample (adaptive pooling's bins as gathers and reductions)."""

from ..ops.conv1d import _single
from . import functional as F
from .conv import add_conv_parameters, check_conv_channels, conv_padding, reset_conv_parameters
from .module import Module


class Conv1d(Module):
    """1-D convolution of an (N, C_in, L) or (C_in, L) input; weight (C_out, C_in, k), bias (C_out,),
    initialised as PyTorch does (U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in * k)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        check_conv_channels(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv1d: padding_mode={padding_mode!r} is not supported; only 'zeros'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = (_single(kernel_size, "kernel_size"),)
        self.stride, self.dilation = (_single(stride, "stride"),), (_single(dilation, "dilation"),)
        self.padding = conv_padding(padding, self.stride, lambda p: (_single(p, "padding"),))
        self.groups, self.padding_mode = groups, padding_mode
        add_conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size), out_channels, bias,
                            device, dtype)

    def reset_parameters(self):
        reset_conv_parameters(self.weight, self.bias)

    def forward(self, input):
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(input, self.weight, self.bias, self.stride[0], padding, self.dilation[0], self.groups)

    def extra_repr(self):
        padding = self.padding if isinstance(self.padding, str) else self.padding
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if padding != (0,):
            text += f", padding={padding}"
        if self.dilation != (1,):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = (_single(kernel_size, "kernel_size"),)
        self.stride = self.kernel_size if stride is None else (_single(stride, "stride"),)
        self.padding = (_single(padding, "padding"),)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)
