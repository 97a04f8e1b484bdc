"""nn.ConvTranspose1d / ConvTranspose2d, with torch.nn's arguments, state_dict names (weight of shape
(C_in, C_out / groups, *kernel), bias (C_out,)), initialisation and reprs; forward's output_size picks the
output_padding, as in torch. The maths is webgrad.ops.conv_transpose."""

from . import functional as F
from .conv import add_conv_parameters, check_conv_channels, reset_conv_parameters
from .module import Module


def _tuple(value, dims, name):
    values = (value,) * dims if isinstance(value, int) else tuple(value)
    if len(values) != dims or any(not isinstance(v, int) or v < 0 for v in values):
        raise ValueError(f"{name} must be an int or {dims} non-negative ints, got {value!r}")
    return values


class _ConvTransposeNd(Module):
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        check_conv_channels(in_channels, out_channels, groups)
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        d = self._dims
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _tuple(kernel_size, d, "kernel_size"), _tuple(stride, d, "stride")
        self.padding, self.output_padding = _tuple(padding, d, "padding"), _tuple(output_padding, d, "output_padding")
        self.dilation, self.groups, self.padding_mode = _tuple(dilation, d, "dilation"), groups, padding_mode
        add_conv_parameters(self, (in_channels, out_channels // groups, *self.kernel_size), out_channels, bias,
                            device, dtype)

    def reset_parameters(self):   # (fan_in: the weight's dim 1, C_out / groups, times the kernel's size)
        reset_conv_parameters(self.weight, self.bias)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        d = self._dims
        output_size = list(output_size)
        batch_dims = 2 if input.ndim == d + 2 else 1
        if len(output_size) == batch_dims + d:
            output_size = output_size[batch_dims:]
        if len(output_size) != d:
            raise ValueError(f"ConvTranspose{d}D: for {input.ndim}D input, output_size must have {d} or "
                             f"{batch_dims + d} elements (got {len(output_size)})")
        smallest = [(input.shape[batch_dims + i] - 1) * self.stride[i] - 2 * self.padding[i] +
                    self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(d)]
        largest = [s + stride - 1 for s, stride in zip(smallest, self.stride)]
        if any(not lo <= size <= hi for size, lo, hi in zip(output_size, smallest, largest)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {smallest} to "
                             f"{largest} (for an input of {list(input.shape[batch_dims:])})")
        return tuple(size - lo for size, lo in zip(output_size, smallest))

    def extra_repr(self):
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        for name, default in (("padding", 0), ("dilation", 1), ("output_padding", 0)):
            if getattr(self, name) != (default,) * self._dims:
                text += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class ConvTranspose1d(_ConvTransposeNd):
    """Over (N, C_in, L) or (C_in, L) inputs; weight (C_in, C_out, k)."""
    _dims = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Over (N, C_in, H, W) or (C_in, H, W) inputs; weight (C_in, C_out, kh, kw)."""

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)
