"""Transposed convolution (the gradient of a convolution with respect to its input, used as a layer)
of (N, C_in, H, W) and (N, C_in, L) inputs, as a stride-1 convolution: the input's pixels are spread
stride apart with zeros between them, padded by dilation * (k - 1) - padding on each side (plus
output_padding after), and convolved with the weight flipped in space and with its channel dims
swapped. Every step is a tensor op (pad, reshape, flip, conv2d), so it runs on the input's device
with gradients."""
from ..amp import autocast_op
from .conv import _pair, check_group_count, conv2d, pad


def _spread(x, stride):
    """x (N, C, H, W) with stride - 1 zeros between neighbouring pixels in each spatial dim."""
    (sh, sw), (n, c, h, w) = stride, x.shape
    if sh > 1:
        x = pad(x.unsqueeze(3), (0, 0, 0, sh - 1)).reshape(n, c, h * sh, w)[:, :, :(h - 1) * sh + 1]
    if sw > 1:
        rows = x.shape[2]
        x = pad(x.unsqueeze(4), (0, sw - 1)).reshape(n, c, rows, w * sw)[..., :(w - 1) * sw + 1]
    return x


def _border(x, dim, before, after):
    """x padded with zeros along dim by before and after, or cropped where they are negative."""
    widths = [0, 0] * (x.ndim - dim)
    widths[-2:] = [max(before, 0), max(after, 0)]
    x = pad(x, tuple(widths))
    start, end = max(-before, 0), x.shape[dim] - max(-after, 0)
    return x.narrow(dim, start, end - start)


@autocast_op
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """weight (C_in, C_out / groups, kh, kw); the output is (N, C_out, (H - 1) * stride - 2 * padding +
    dilation * (kh - 1) + output_padding + 1, likewise for W)."""
    if input.ndim not in (3, 4) or weight.ndim != 4:
        raise RuntimeError(f"conv_transpose2d: expected a 3-D or 4-D input and a 4-D weight, got input "
                           f"{list(input.shape)} and weight {list(weight.shape)}")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[0]} channels, but got {x.shape[1]} channels "
                           "instead")
    check_group_count(weight, groups)
    stride, padding = _pair(stride, "stride"), _pair(padding, "padding")
    output_padding, dilation = _pair(output_padding, "output_padding"), _pair(dilation, "dilation")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding_height: {output_padding[0]} output_padding_width: {output_padding[1]} "
                           f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    x = _spread(x, stride)
    for dim, k, p, d, extra in zip((2, 3), weight.shape[2:], padding, dilation, output_padding):
        x = _border(x, dim, d * (k - 1) - p, d * (k - 1) - p + extra)
    # each group's (C_in / groups, C_out / groups) block of the weight, its channel dims swapped
    c_in, c_out, kh, kw = weight.shape
    weight = weight.reshape(groups, c_in // groups, c_out, kh, kw).transpose(1, 2)
    out = conv2d(x, weight.reshape(groups * c_out, c_in // groups, kh, kw).flip(2, 3), bias, 1, 0, dilation, groups)
    return out.squeeze(0) if unbatched else out


@autocast_op
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """weight (C_in, C_out, k), over (N, C_in, L) or (C_in, L) inputs: conv_transpose2d over (N, C, 1, L)."""
    if input.ndim not in (2, 3) or weight.ndim != 3:
        raise RuntimeError(f"conv_transpose1d: expected a 2-D or 3-D input and a 3-D weight, got input "
                           f"{list(input.shape)} and weight {list(weight.shape)}")

    def one(value):
        return (1, value[0] if isinstance(value, (tuple, list)) else value)
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, one(stride), (0, one(padding)[1]),
                           (0, one(output_padding)[1]), groups, one(dilation))
    return out.squeeze(-2)
