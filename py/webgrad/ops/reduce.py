"""Reductions over any set of dims: sum, max, min (and their arg forms), mean, var.

The backend reduces a strided input over the given dims in one kernel (shaders/reduce.wgsl);
keepdim is a reshape here.
"""
import collections
import math

from .. import dtypes
from ..backends.base import ARGMAX, ARGMIN, MAX, MIN, SUM
from ..autograd import Function
from .movement import wrap_dim
from .._tensor import Tensor


def _dims(x, dim):
    if dim is None or dim == () or dim == []:   # torch: an empty dim list reduces every dim
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    out = tuple(sorted({wrap_dim(d, x.ndim) for d in dims}))
    if len(out) != len(dims):
        raise RuntimeError(f"dim {tuple(dims)} appears multiple times in the list of dims")
    return out if x.ndim else ()   # a 0-d tensor's dim 0 / -1 (as in torch) reduces nothing


def _kept_shape(shape, dims):
    return tuple(1 if d in dims else s for d, s in enumerate(shape))


def _reduce(op, x, dims, keepdim, out_dtype):
    if op is not SUM and any(x.shape[d] == 0 for d in dims):
        raise RuntimeError(f"{op.name}(): expected a non-empty input over the reduced dims")
    shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
    out = Tensor(x.backend.reduce(op, x._view, dims, out_dtype), shape, out_dtype, x.device)
    return out.reshape(_kept_shape(x.shape, dims)) if keepdim else out


class _Sum(Function):
    def forward(self, x, dims, keepdim):
        self.in_shape, self.dims = x.shape, dims
        out_dtype = x.dtype if x.dtype.is_floating_point else dtypes.int32
        return _reduce(SUM, x, dims, keepdim, out_dtype)

    def backward(self, grad):
        return grad.reshape(_kept_shape(self.in_shape, self.dims)).expand(self.in_shape)


class _Extreme(Function):
    """amax / amin; the gradient is shared evenly between tied extremes."""

    def forward(self, x, op, dims, keepdim):
        self.x, self.dims = x, dims
        self.out = _reduce(op, x, dims, True, x.dtype)
        return self.out if keepdim else self.out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))

    def backward(self, grad):
        kept = _kept_shape(self.x.shape, self.dims)
        hit = (self.x == self.out).float()
        return grad.reshape(kept) * hit / hit.sum(self.dims, keepdim=True)


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return _Sum.apply(x, _dims(x, dim), keepdim)


def mean(x, dim=None, keepdim=False):
    dims = _dims(x, dim)
    if not x.dtype.is_floating_point:
        x = x.float()
    count = math.prod(x.shape[d] for d in dims)
    return sum(x, dims, keepdim) / count if count else sum(x, dims, keepdim) * math.nan


def var(x, dim=None, keepdim=False, correction=1):
    dims = _dims(x, dim)
    if not x.dtype.is_floating_point:
        x = x.float()
    deviation = x - mean(x, dims, keepdim=True)
    count = math.prod(x.shape[d] for d in dims)
    # (not max(): this module's max is the tensor reduction)
    return sum(deviation * deviation, dims, keepdim) / (count - correction if count > correction else 0)


def amax(x, dim=None, keepdim=False):
    return _Extreme.apply(x, MAX, _dims(x, dim), keepdim)


def amin(x, dim=None, keepdim=False):
    return _Extreme.apply(x, MIN, _dims(x, dim), keepdim)


MinMax = collections.namedtuple("MinMax", ["values", "indices"])


def max(x, dim=None, keepdim=False):  # noqa: A001
    """max() over everything, or (values, indices) along one dim, as in PyTorch."""
    return amax(x) if dim is None else _values_and_indices(ARGMAX, x, dim, keepdim)


def min(x, dim=None, keepdim=False):  # noqa: A001
    return amin(x) if dim is None else _values_and_indices(ARGMIN, x, dim, keepdim)


def _values_and_indices(op, x, dim, keepdim):
    """The values are gathered at the indices, so (as in PyTorch) their gradient goes to the returned
    index alone; amax/amin share it between ties."""
    flat = x.reshape(1) if x.ndim == 0 else x   # a 0-d tensor: dim 0 or -1 is its one value
    dim = wrap_dim(dim, flat.ndim)
    indices = _reduce(op, flat, (dim,), True, dtypes.int32)
    values = flat.gather(dim, indices)
    shape = _kept_shape(x.shape, (dim,)) if keepdim else tuple(s for d, s in enumerate(x.shape) if d != dim)
    return MinMax(values.reshape(shape), indices.reshape(shape))


def _arg(op, x, dim, keepdim):
    if dim is not None and x.ndim == 0:
        wrap_dim(dim, 0)           # 0 and -1 are valid for a 0-d tensor, as in torch
        dim = None
    if dim is None:   # over every dim at once (no flattening copy, which a strided uint8 view could not make)
        out = _reduce(op, x, tuple(range(x.ndim)), False, dtypes.int32)
        return out.reshape((1,) * x.ndim) if keepdim else out
    return _reduce(op, x, (wrap_dim(dim, x.ndim),), keepdim, dtypes.int32)


def argmax(x, dim=None, keepdim=False):
    return _arg(ARGMAX, x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _arg(ARGMIN, x, dim, keepdim)
