"""1-D convolution and pooling over (N, C, L) or unbatched (C, L) inputs, as the 2-D ops over
(N, C, 1, L): the same kernels and gradients."""
from ..amp import autocast_op
from .conv import avg_pool2d, check_groups, conv2d, max_pool2d, pad


def _single(value, name):
    single = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(single) != 1 or not isinstance(single[0], int):
        raise ValueError(f"{name} must be an int or a 1-tuple of ints, got {value!r}")
    return single[0]


def _batched(input, name):
    """input as (N, C, 1, L), and whether it came without a batch dim."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to {name}, but got input of size: "
                           f"{list(input.shape)}")
    unbatched = input.ndim == 2
    return (input.unsqueeze(0) if unbatched else input).unsqueeze(2), unbatched


def _restore(out, unbatched):
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


def same_padding(kernel_size, dilation):
    """(left, right) zero padding that keeps the length at stride 1 (the extra one after, as PyTorch)."""
    total = dilation * (kernel_size - 1)
    return total // 2, total - total // 2


@autocast_op
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: expected a 3-D weight (C_out, C_in, k), got shape {list(weight.shape)}")
    x, unbatched = _batched(input, "conv1d")
    stride, dilation = _single(stride, "stride"), _single(dilation, "dilation")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: {padding!r}")
        if padding == "same" and stride != 1:
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        if padding == "same":
            x = pad(x, same_padding(weight.shape[2], dilation))
        padding = 0
    check_groups(input.unsqueeze(0) if unbatched else input, weight, groups)
    out = conv2d(x, weight.unsqueeze(2), bias, (1, stride), (0, _single(padding, "padding")), (1, dilation), groups)
    return _restore(out, unbatched)


def _pool_geometry(kernel_size, stride, padding, dilation=1):
    kernel = _single(kernel_size, "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else _single(stride, "stride")
    return (1, kernel), (1, stride), (0, _single(padding, "padding")), (1, _single(dilation, "dilation"))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """With return_indices, also each output's position in its input row, as int32."""
    x, unbatched = _batched(input, "max_pool1d")
    kernel, stride, padding, dilation = _pool_geometry(kernel_size, stride, padding, dilation)
    out = max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices)
    if return_indices:
        return _restore(out[0], unbatched), _restore(out[1], unbatched)
    return _restore(out, unbatched)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    x, unbatched = _batched(input, "avg_pool1d")
    kernel, stride, padding, _ = _pool_geometry(kernel_size, stride, padding)
    return _restore(avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad), unbatched)
