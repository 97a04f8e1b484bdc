"""Resampling over an (N, C, *spatial) input: F.interpolate's nearest and linear modes, adaptive
pooling and pixel (un)shuffle. Each is composed from gathers (index_select), lerps, reductions and
reshapes, one spatial dim at a time, so it runs on the input's device and has gradients.

The source positions are computed on the host in float32, as PyTorch's CPU kernels compute them,
so each output reads the same source elements (and weights) as PyTorch."""
import math

from .. import dtypes
from .creation import _f32, tensor
from ..dtypes import TYPE_NAMES
from .reduce import amax

_INTERPOLATE_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area", "nearest-exact")
_LINEAR_NDIM = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _indices(values, x):
    return tensor(values, dtype=dtypes.int32, device=x.device)


def _gather(x, dim, positions):
    """x's entries at `positions` (host ints) along dim."""
    return x.index_select(dim, _indices(positions, x))


def _source_scale(in_size, out_size, scale):
    """PyTorch's compute_scales_value: 1/scale_factor where one is given, else in/out (float32)."""
    return _f32(1.0 / scale) if scale is not None and scale > 0 else _f32(in_size / out_size)


def _nearest(x, dim, out_size, scale, exact):
    in_size = x.shape[dim]
    # PyTorch's 2-D nearest kernel (alone) copies at 1x and halves indices at 2x, whatever the scale factor
    if not exact and x.ndim == 4 and out_size == in_size:
        return x
    if not exact and x.ndim == 4 and out_size == 2 * in_size:
        return _gather(x, dim, [i // 2 for i in range(out_size)])
    step = _source_scale(in_size, out_size, scale)
    offset = 0.5 if exact else 0.0
    return _gather(x, dim, [min(math.floor(_f32((i + offset) * step)), in_size - 1) for i in range(out_size)])


def _linear(x, dim, out_size, scale, align_corners):
    """Each output is lerp(x[i0], x[i1], w) at its source position along dim."""
    in_size = x.shape[dim]
    if align_corners:
        step = _f32((in_size - 1) / (out_size - 1)) if out_size > 1 else 0.0
        sources = [_f32(step * i) for i in range(out_size)]
    else:
        step = _source_scale(in_size, out_size, scale)
        sources = [max(_f32(_f32(step * _f32(i + 0.5)) - 0.5), 0.0) for i in range(out_size)]
    low = [min(int(s), in_size - 1) for s in sources]
    high = [i + 1 if i < in_size - 1 else i for i in low]
    weight = [min(max(_f32(s - i), 0.0), 1.0) for s, i in zip(sources, low)]
    shape = [1] * x.ndim
    shape[dim] = out_size
    w = tensor(weight, dtype=x.dtype, device=x.device).reshape(shape)
    start = _gather(x, dim, low)
    return start + (_gather(x, dim, high) - start) * w


def _output_sizes(x, size, scale_factor):
    """The spatial output sizes and the scale factors (None where the sizes came from `size`)."""
    spatial = x.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * spatial
        if len(sizes) != spatial:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(x.shape[2:])} and output size of {list(sizes)}. "
                             "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             "(o1, o2, ...,oK) format.")
        return [int(s) for s in sizes], [None] * spatial
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * spatial
    if len(scales) != spatial:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                         f"with spatial dimensions of {list(x.shape[2:])} and scale_factor of shape "
                         f"{list(scales)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                         "scale_factor in (s1, s2, ...,sK) format.")
    return [math.floor(float(n) * float(s)) for n, s in zip(x.shape[2:], scales)], [float(s) for s in scales]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate: modes nearest, nearest-exact, linear (3-D input), bilinear
    (4-D), trilinear (5-D) and area (adaptive average pooling), one spatial dim after another."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if mode not in _INTERPOLATE_MODES or input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) "
                                  f"for the modes: {' | '.join(_INTERPOLATE_MODES)} (got {mode})")
    if mode in _LINEAR_NDIM and input.ndim != _LINEAR_NDIM[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR_NDIM[mode]}D input")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if mode in ("bicubic", "lanczos"):
        raise NotImplementedError(f"interpolate: mode={mode!r} is not supported; use bilinear")
    sizes, scales = _output_sizes(input, size, scale_factor)
    if recompute_scale_factor:
        if size is not None:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        scales = [None] * len(sizes)
    if mode == "area":
        return adaptive_avg_pool(input, sizes)
    out = input
    for dim, (out_size, scale) in enumerate(zip(sizes, scales), start=2):
        if out_size <= 0:
            raise RuntimeError(f"interpolate: output size must be positive, got {sizes}")
        if mode in _LINEAR_NDIM:
            out = _linear(out, dim, out_size, scale, align_corners)
        else:
            out = _nearest(out, dim, out_size, scale, mode == "nearest-exact")
    return out


# ---- adaptive pooling: torch's bins start at floor(i * in / out) and end at ceil((i + 1) * in / out) ----
def _bins(in_size, out_size):
    return [((i * in_size) // out_size, -(-(i + 1) * in_size // out_size)) for i in range(out_size)]


def _pooled(x, dim, out_size, reduce):
    """reduce over each bin along dim: the bins (of at most two widths) are gathered to the widest
    one's width, padded by repeating their last element, then reduced over that width."""
    in_size = x.shape[dim]
    if out_size == in_size:
        return x
    bins = _bins(in_size, out_size)
    width = max(end - start for start, end in bins)
    positions = [min(start + k, end - 1) for start, end in bins for k in range(width)]
    gathered = _gather(x, dim, positions)
    windows = gathered.reshape(x.shape[:dim] + (out_size, width) + x.shape[dim + 1:])
    return reduce(windows, dim + 1, bins, width)


def _bin_mean(windows, dim, bins, width):
    """Mean over each bin: the repeated last elements are counted out by per-bin weights."""
    if all(end - start == width for start, end in bins):
        return windows.mean(dim)
    weights = [(1.0 / (end - start) if k < end - start else 0.0) for start, end in bins for k in range(width)]
    shape = [1] * windows.ndim
    shape[dim - 1], shape[dim] = len(bins), width
    return (windows * tensor(weights, dtype=windows.dtype, device=windows.device).reshape(shape)).sum(dim)


def _bin_max(windows, dim, bins, width):
    return amax(windows, dim)   # a repeated element does not change a maximum


def _adaptive(x, output_size, spatial, name, reduce):
    if x.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{name}(): Expected {spatial + 1}D or {spatial + 2}D tensor, but got "
                           f"{list(x.shape)}")
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * spatial
    if len(sizes) != spatial:
        raise ValueError(f"{name}: output_size must have {spatial} entries, got {list(sizes)}")
    first = x.ndim - spatial
    sizes = [x.shape[first + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if any(s < 0 for s in sizes) or any(n == 0 for n in x.shape[first:]):
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                           f"input has sizes {list(x.shape)} with output_size {sizes}")
    if reduce is _bin_mean and not x.dtype.is_floating_point:   # torch refuses them (to one cell, as mean())
        if all(s == 1 for s in sizes):
            raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point "
                               f"or complex dtype. Got: {TYPE_NAMES[x.dtype.name]}")
        raise NotImplementedError(f'"{name}" not implemented for \'{TYPE_NAMES[x.dtype.name]}\'')
    for i, out_size in enumerate(sizes):
        x = _pooled(x, first + i, out_size, reduce)
    return x


def adaptive_avg_pool(x, sizes):
    return _adaptive(x, sizes, len(sizes), f"adaptive_avg_pool{len(sizes)}d", _bin_mean)


def adaptive_avg_pool1d(input, output_size):
    return _adaptive(input, output_size, 1, "adaptive_avg_pool1d", _bin_mean)


def adaptive_avg_pool2d(input, output_size):
    return _adaptive(input, output_size, 2, "adaptive_avg_pool2d", _bin_mean)


def adaptive_avg_pool3d(input, output_size):
    return _adaptive(input, output_size, 3, "adaptive_avg_pool3d", _bin_mean)


def _adaptive_max(input, output_size, return_indices, spatial):
    name = f"adaptive_max_pool{spatial}d"
    if return_indices:
        raise NotImplementedError(f"{name}: return_indices=True is not supported")
    return _adaptive(input, output_size, spatial, name, _bin_max)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max(input, output_size, return_indices, 1)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max(input, output_size, return_indices, 2)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max(input, output_size, return_indices, 3)


# ---- pixel (un)shuffle: (*, C r^2, H, W) <-> (*, C, H r, W r) ----
def _check_pixel_input(x, name, factor):
    if x.ndim < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input with {x.ndim} "
                           "dimension(s)")
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {'upscale' if name == 'pixel_shuffle' else 'downscale'}"
                           f"_factor, but got {factor}")


def pixel_shuffle(input, upscale_factor):
    r = upscale_factor
    _check_pixel_input(input, "pixel_shuffle", r)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    r = downscale_factor
    _check_pixel_input(input, "pixel_unshuffle", r)
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects {'height' if h % r else 'width'} to be divisible by "
                           f"downscale_factor, but input.size({-2 if h % r else -1})={h if h % r else w} is not "
                           f"divisible by {r}")
    n = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)
