"""Reductions over any set of dims: sum, prod, max, min (and their arg forms), all, any, mean,
var/std, logsumexp and vector norms.

The backend reduces a strided input over the given dims in one kernel (shaders/reduce.wgsl);
keepdim is a reshape here.
"""
import builtins
import collections
import functools
import math

from ..amp import autocast_op
from .. import dtypes
from ..backends.base import ARGMAX, ARGMIN, MAX, MIN, SUM, Reduction
from ..autograd import Function
from .elementwise import MapOp, _map, maximum, minimum, where, zero_gradient
from .movement import wrap_dim
from .._tensor import Tensor, tensor_method

PROD = Reduction("prod", "T(1)", "acc = acc * v;", lambda np, a, axes: a.prod(axis=axes))
# 1 where x is nonzero: the 0-"norm"'s terms, whose gradient is zero (not none), as in PyTorch
NONZERO = MapOp("nonzero", "select(T(0), T(1), a != T(0))", lambda np, a: (a != 0).astype(a.dtype),
                (zero_gradient,))


def reduction(fn):
    """A reduction, also as a Tensor method, taking the NumPy spellings torch accepts too: axis for
    dim, keepdims for keepdim."""
    @functools.wraps(fn)
    def reduce_by_torch_names(x, *args, axis=None, keepdims=None, **kwargs):
        if axis is not None:
            kwargs["dim"] = axis
        if keepdims is not None:
            kwargs["keepdim"] = keepdims
        return fn(x, *args, **kwargs)
    return tensor_method(reduce_by_torch_names)


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
    if op not in (SUM, PROD) and builtins.any(x.shape[d] == 0 for d in dims):
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


@reduction
@autocast_op
def sum(x, dim=None, keepdim=False, *, dtype=None):
    return _Sum.apply(x if dtype is None else x.to(dtype), _dims(x, dim), keepdim)


@reduction
@autocast_op
def mean(x, dim=None, keepdim=False, *, dtype=None):
    dims = _dims(x, dim)
    target = x.dtype if dtype is None else dtypes.as_dtype(dtype)
    if not target.is_floating_point:   # torch infers no mean for integers: it raises
        given = "Input" if dtype is None else "Optional"
        raise RuntimeError(f"mean(): could not infer output dtype. {given} dtype must be either a floating point "
                           f"or complex dtype. Got: {dtypes.TYPE_NAMES[target.name]}")
    x = x.to(target)
    count = math.prod(x.shape[d] for d in dims)
    return sum(x, dims, keepdim) / count if count else sum(x, dims, keepdim) * math.nan


class _Prod(Function):
    """The product's gradient is the product of the other elements: out / x where x has no zeros,
    and worked out from the nonzero elements' product where it has (as PyTorch does)."""

    def forward(self, x, dims, keepdim):
        self.x, self.dims = x, dims
        out_dtype = x.dtype if x.dtype.is_floating_point else dtypes.int32
        return _reduce(PROD, x, dims, keepdim, out_dtype)

    def backward(self, grad):
        x, dims = self.x, self.dims
        zero = x == 0
        zeros = zero.int().sum(dims, keepdim=True)
        others = _reduce(PROD, where(zero, 1.0, x), dims, True, x.dtype)   # the product of the nonzero elements
        share = where(zero, where(zeros == 1, others, 0.0), where(zeros == 0, others / x, 0.0))
        return share * grad.reshape(_kept_shape(x.shape, dims))


@reduction
@autocast_op
def prod(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    if dim is not None and isinstance(dim, (tuple, list)):
        raise TypeError("prod(): dim must be a single int, not a tuple (as in torch)")
    return _Prod.apply(x, _dims(x, dim), keepdim)


def _truth(x, dim, keepdim, op, empty):
    """all (op MIN) / any (op MAX) as bool: over no elements they are `empty`."""
    dims = _dims(x, dim)
    if builtins.any(x.shape[d] == 0 for d in dims):
        from .creation import full
        shape = _kept_shape(x.shape, dims) if keepdim else tuple(s for d, s in enumerate(x.shape) if d not in dims)
        return full(shape, empty, dtype=dtypes.bool_, device=x.device)
    return _reduce(op, x != 0, dims, keepdim, dtypes.bool_)


@reduction
def all(x, dim=None, keepdim=False):
    return _truth(x, dim, keepdim, MIN, True)


@reduction
def any(x, dim=None, keepdim=False):
    return _truth(x, dim, keepdim, MAX, False)


def _var_correction(dim, unbiased, correction):
    """PyTorch's var/std arguments: (dim, unbiased, keepdim) positionally, or correction= by keyword;
    var(True) means unbiased=True."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError("var/std: unbiased and correction cannot both be given")
    return dim, (1 if unbiased is None and correction is None else
                 int(unbiased) if unbiased is not None else correction)


@reduction
@autocast_op
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    dim, correction = _var_correction(dim, unbiased, correction)
    dims = _dims(x, dim)
    if not x.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    deviation = x - mean(x, dims, keepdim=True)
    count = math.prod(x.shape[d] for d in dims)
    # (not max(): this module's max is the tensor reduction)
    return sum(deviation * deviation, dims, keepdim) / (count - correction if count > correction else 0)


@reduction
@autocast_op
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(x, dim, unbiased, keepdim, correction=correction).sqrt()


@reduction
@autocast_op
def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) with the max taken out first (0 where it is infinite, as in PyTorch)."""
    dims = _dims(x, dim)
    if not x.dtype.is_floating_point:
        x = x.float()
    top = amax(x.detach(), dims, keepdim=True)
    top = where(top.abs() == math.inf, 0.0, top)
    out = (x - top).exp().sum(dims, keepdim=True).log() + top
    return out if keepdim else out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))


@reduction
def amax(x, dim=None, keepdim=False):
    return _Extreme.apply(x, MAX, _dims(x, dim), keepdim)


@reduction
def amin(x, dim=None, keepdim=False):
    return _Extreme.apply(x, MIN, _dims(x, dim), keepdim)


MinMax = collections.namedtuple("MinMax", ["values", "indices"])


@reduction
def max(x, dim=None, keepdim=False):
    """max() over everything, (values, indices) along one dim, or with a tensor, maximum(x, other),
    as in PyTorch."""
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    return amax(x) if dim is None else _values_and_indices(ARGMAX, x, dim, keepdim)


@reduction
def min(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return minimum(x, dim)
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


@reduction
def argmax(x, dim=None, keepdim=False):
    return _arg(ARGMAX, x, dim, keepdim)


@reduction
def argmin(x, dim=None, keepdim=False):
    return _arg(ARGMIN, x, dim, keepdim)


class _PNorm(Function):
    """sum(|x|^p)^(1/p) for a finite p > 0, with PyTorch's gradient: sign(x) |x|^(p-1) / norm^(p-1),
    0 where x is 0 or the norm is 0 (so a zero vector's 2-norm has gradient 0, not NaN)."""

    def forward(self, x, p, dims, keepdim):
        self.x, self.p, self.dims = x, p, dims
        a = x.abs()
        total = sum(a * a if p == 2 else a ** p, dims, keepdim=True)
        self.out = total.sqrt() if p == 2 else total ** (1.0 / p)
        return self.out if keepdim else self.out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))

    def backward(self, grad):
        x, p, out = self.x, self.p, self.out
        scaled = x if p == 2 else where(x == 0, 0.0, x.sign() * x.abs() ** (p - 1))
        scale = where(out == 0, 0.0, grad.reshape(out.shape) / (out if p == 2 else out ** (p - 1)))
        return scaled * scale


@autocast_op
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: ord 2 (default), any p > 0, inf, -inf and 0 (the count of nonzeros)."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {x.dtype.name}")
    dims = _dims(x, dim)
    if ord == math.inf:
        return amax(x.abs(), dims, keepdim)
    if ord == -math.inf:
        return amin(x.abs(), dims, keepdim)
    if ord == 0:
        return sum(_map(NONZERO, x), dims, keepdim)
    if ord == 1:
        return sum(x.abs(), dims, keepdim)
    if ord < 0:
        raise NotImplementedError(f"vector_norm: ord={ord} (a negative p) is not supported")
    return _PNorm.apply(x, float(ord), dims, keepdim)


@tensor_method
@autocast_op
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'fro' (the 2-norm of the elements, over dim or all of them) or a vector p-norm."""
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm is not supported")
    return vector_norm(x, 2 if p == "fro" else p, dim, keepdim, dtype=dtype)
