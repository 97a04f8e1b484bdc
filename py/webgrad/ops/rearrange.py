"""Ops that rearrange or mask elements, composed of views, gathers and elementwise kernels (so they
run, and differentiate, on the input's device): flip, roll, repeat, tile, tril, triu, masked_fill."""
import math

from .. import dtypes
from .elementwise import where
from .movement import cat, wrap_dim
from .._tensor import Tensor, tensor_method


def _dim_list(dims, ndim, what):
    dims = [wrap_dim(d, ndim) for d in (dims if isinstance(dims, (tuple, list)) else (dims,))]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{what}: dim {dims} appears multiple times in the list of dims")
    return dims


def _sizes(args):
    """f(2, 3) and f((2, 3)) both mean (2, 3)."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


@tensor_method
def flip(x, *listed, dims=None):
    """x with the order of the elements along dims (flip(x, dims), x.flip(0, 1)) reversed: a gather along each."""
    from .creation import arange
    out = x
    for d in _dim_list(_sizes(listed) if dims is None else _sizes((dims,)), x.ndim, "flip"):
        n = x.shape[d]
        if n > 1:
            out = out.index_select(d, arange(n - 1, -1, -1, device=x.device))
    return out if out is not x else x.clone()


def fliplr(x):
    return flip(x, 1)


def flipud(x):
    return flip(x, 0)


@tensor_method
def roll(x, shifts, dims=None):
    """Elements shifted along dims, wrapping around (dims=None: over the flattened tensor)."""
    if dims is None:
        return roll(x.flatten(), shifts, 0).reshape(x.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = x
    for shift, d in zip(shifts, dims):
        d = wrap_dim(d, x.ndim)
        n = x.shape[d]
        s = shift % n if n else 0
        if s:
            head = tuple(slice(n - s, None) if k == d else slice(None) for k in range(x.ndim))
            tail = tuple(slice(0, n - s) if k == d else slice(None) for k in range(x.ndim))
            out = cat([out[head], out[tail]], d)
    return out if out is not x else x.clone()


@tensor_method
def repeat(x, *sizes):
    """x tiled sizes[d] times along each dim (more sizes than dims add leading dims): a broadcast
    view made contiguous, so one copy; its gradient sums the copies."""
    sizes = _sizes(sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                           "of tensor")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    spread = [v for s in shape for v in (1, s)]
    wide = [v for r, s in zip(sizes, shape) for v in (r, s)]
    return x.reshape(spread).expand(wide).reshape(tuple(r * s for r, s in zip(sizes, shape)))


@tensor_method
def tile(x, *dims):
    dims = _sizes(dims)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def _triangle(x, diagonal, lower):
    from .creation import arange
    name = "tril" if lower else "triu"
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    rows, cols = x.shape[-2:]
    offset = arange(cols, device=x.device) - arange(rows, device=x.device).reshape(rows, 1)
    keep = offset <= diagonal if lower else offset >= diagonal
    return where(keep, x, False if x.dtype is dtypes.bool_ else 0).to(x.dtype)


@tensor_method
def tril(x, diagonal=0):
    """The elements on and below the diagonal-th diagonal of the last two dims; zeros elsewhere."""
    return _triangle(x, diagonal, True)


@tensor_method
def triu(x, diagonal=0):
    return _triangle(x, diagonal, False)


@tensor_method
def masked_fill(x, mask, value):
    """value where mask (a bool tensor broadcast with x) is True, x elsewhere; x's dtype. A 0-d tensor
    value gets the gradient of the places it fills."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        kind = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {kind}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        value = value.to(x.dtype)
    elif not x.dtype.is_floating_point:
        value = bool(value) if x.dtype is dtypes.bool_ else math.trunc(value)
    return where(mask, value, x).to(x.dtype)
