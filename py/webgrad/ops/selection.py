"""Ops whose result's size or answer depends on the values: nonzero/argwhere, unique, bincount,
equal (each reads back to the host what sizes the result, as torch's CUDA does); and the order
statistics and reductions torch adds beside ops/reduce.py's: median, kthvalue, aminmax, var_mean,
std_mean, nansum, nanmean, count_nonzero, cumprod."""
import builtins
import collections

from .. import dtypes
from .creation import ones, tensor, zeros
from ..backends.base import wgsl_is_nan
from .elementwise import MapOp, _map
from ..dtypes import TYPE_NAMES
from .masking import true_positions
from .movement import cat, wrap_dim
from .reduce import amax, amin, mean, std, sum, var
from .sort import SortResult, sort
from .unary import isnan
from .._tensor import Tensor, tensor_method

MinMax = collections.namedtuple("aminmax", ["min", "max"])


# ---- sized by the values ----
@tensor_method
def nonzero(input, *, as_tuple=False):
    """The positions of nonzero elements: an (n, ndim) int tensor, or (as_tuple) one 1-D tensor per dim."""
    if as_tuple and input.ndim == 0:   # as torch: a 0-d input counts as one element long
        return nonzero(input.reshape(1), as_tuple=True)
    flat = true_positions(input != 0)
    rows = []
    for position in flat:
        index = []
        for size in reversed(input.shape):
            position, i = divmod(position, size)
            index.append(i)
        rows.append(index[::-1])
    if as_tuple:
        return tuple(tensor([r[d] for r in rows], dtype=dtypes.int32, device=input.device)
                     for d in range(max(input.ndim, 1)))
    if not rows:
        return zeros((0, input.ndim), dtype=dtypes.int32, device=input.device)
    return tensor(rows, dtype=dtypes.int32, device=input.device).reshape(len(rows), input.ndim)


@tensor_method
def argwhere(input):
    return nonzero(input)


@tensor_method
def count_nonzero(input, dim=None):
    return (input != 0).sum(dim)


@tensor_method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (or, along dim, the distinct slices) in ascending order (sorted=False
    sorts too, as torch's CPU does), with the position of each element's (slice's) among them and
    how many there are of each. The values are read back and compared on the host."""
    if dim is None:
        keys = input.reshape(-1).tolist()
    else:
        dim = wrap_dim(dim, input.ndim)
        keys = [tuple(row) for row in input.movedim(dim, 0).reshape(input.shape[dim], -1).tolist()]
    distinct = builtins.sorted(set(keys))
    if dim is None:
        out = [tensor(distinct, dtype=input.dtype, device=input.device)]
    else:
        first = {}
        for position, key in enumerate(keys):
            first.setdefault(key, position)
        picked = tensor([first[key] for key in distinct], dtype=dtypes.int32, device=input.device)
        out = [input.index_select(dim, picked)]
    if return_inverse:
        rank = {key: i for i, key in enumerate(distinct)}
        inverse = tensor([rank[key] for key in keys], dtype=dtypes.int32, device=input.device)
        out.append(inverse.reshape(input.shape) if dim is None else inverse)
    if return_counts:
        tally = collections.Counter(keys)
        out.append(tensor([tally[key] for key in distinct], dtype=dtypes.int32, device=input.device))
    return out[0] if len(out) == 1 else tuple(out)


@tensor_method
def bincount(input, weights=None, minlength=0):
    """How many times each value 0..max occurs (at least minlength bins), or the sum of their
    weights. The largest value, which sizes the result, is read back."""
    if input.dtype.is_floating_point:
        raise NotImplementedError(f'"bincount" not implemented for \'{TYPE_NAMES[input.dtype.name]}\'')
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights.shape != input.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    low, high = cat([amin(input).reshape(1), amax(input).reshape(1)]).tolist() if input.numel() else (0, -1)
    if low < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    bins = max(high + 1, minlength)
    index = input.to(dtypes.int32)
    if weights is None:   # (counted in float32: exact up to 2^24 of one value)
        counts = zeros(bins, device=input.device).scatter_add(0, index, ones(index.shape, device=input.device))
        return counts.to(dtypes.int32)
    dtype = weights.dtype if weights.dtype.is_floating_point else dtypes.float32
    return zeros(bins, dtype=dtype, device=input.device).scatter_add(0, index, weights.to(dtype))


def equal(input, other):
    """Whether the two have the same shape and values (a Python bool, read back)."""
    if input.shape != other.shape:
        return False
    return bool((input == other).all().item())


Tensor.equal = equal


# ---- order statistics ----
def _at_rank(name, input, rank_of, dim, keepdim):
    """(values, indices) of the element at rank rank_of(size) along dim of the sorted input."""
    if input.ndim == 0:
        wrap_dim(dim, 0)
        return SortResult(input.clone(), zeros((), dtype=dtypes.int32, device=input.device))
    dim = wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    if size == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size.")
    values, indices = sort(input, dim)
    rank = rank_of(size)
    values, indices = values.narrow(dim, rank, 1), indices.narrow(dim, rank, 1)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return SortResult(values, indices)


@tensor_method
def median(input, dim=None, keepdim=False):
    """The lower of the two middle values (all elements, or along dim with their indices)."""
    if dim is None:
        if input.numel() == 0:
            return tensor(float("nan"), dtype=input.dtype, device=input.device)
        return _at_rank("median", input.reshape(-1), lambda n: (n - 1) // 2, 0, False).values
    return _at_rank("median", input, lambda n: (n - 1) // 2, dim, keepdim)


@tensor_method
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest (k from 1) along dim, and its index."""
    wrapped = wrap_dim(dim, input.ndim)
    size = input.shape[wrapped] if input.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {wrapped}")
    return _at_rank("kthvalue", input, lambda n: k - 1, dim, keepdim)


@tensor_method
def aminmax(input, *, dim=None, keepdim=False):
    return MinMax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@tensor_method
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as zero."""
    kept = _map(_NAN_AS_ZERO, input) if input.dtype.is_floating_point else input
    return sum(kept, dim, keepdim, dtype=dtype)


# NaN read as 0, its gradient the upstream one times "not NaN", as torch's nansum's: so an infinite
# upstream (nanmean of a slice that is all NaN) gives NaN there, not 0
_NAN_AS_ZERO = MapOp("nan_as_zero", f"select(a, T(0), {wgsl_is_nan('a')})",
                     lambda np, a: np.where(np.isnan(a), 0, a).astype(a.dtype), (lambda g, a, o: g * ~isnan(a),))


@tensor_method
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the values that are not NaN."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{TYPE_NAMES[input.dtype.name]}")
    counted = (~isnan(input)).sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / counted


