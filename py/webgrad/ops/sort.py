"""Sorting along a dim: sort, argsort, topk, msort. The device sorts indices (backend.argsort: a
stable bitonic network, shaders/sort.wgsl, NaN above every number as in PyTorch); the values are
gathered at them, so their gradient is gather's (a scatter-add to the picked positions)."""
import collections

from .. import dtypes
from .movement import wrap_dim
from .._tensor import Tensor, tensor_method

SortResult = collections.namedtuple("SortResult", ["values", "indices"])


def _keys(x):
    """Sortable keys: float32 or int32 (float16 as float32, exactly; bools and bytes as int32)."""
    if x.dtype is dtypes.float16:
        return x.float()
    return x if x.dtype in (dtypes.float32, dtypes.int32, dtypes.float64) else x.to(dtypes.int32)


def _argsort(x, dim, descending):
    if x.ndim == 0:
        wrap_dim(dim, 0)
        from .creation import zeros
        return zeros((), dtype=dtypes.int32, device=x.device)
    dim = wrap_dim(dim, x.ndim)
    keys = _keys(x.detach())
    return Tensor(x.backend.argsort(keys._view, dim, descending), x.shape, dtypes.int32, x.device)


@tensor_method
def argsort(x, dim=-1, descending=False, stable=False):
    """Always stable (ties keep their order), so stable=True costs nothing extra."""
    return _argsort(x, dim, descending)


@tensor_method
def sort(x, dim=-1, descending=False, stable=False):
    indices = _argsort(x, dim, descending)
    values = x.clone() if x.ndim == 0 else x.gather(wrap_dim(dim, x.ndim), indices)
    return SortResult(values, indices)


@tensor_method
def msort(x):
    return sort(x, 0).values


@tensor_method
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) along dim, in order (sorted=False gives them in order too)."""
    size = x.shape[wrap_dim(dim, x.ndim)] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: selected index k out of range (k={k}, dim size {size})")
    if x.ndim == 0:
        return SortResult(x.clone(), _argsort(x, dim, largest))
    dim = wrap_dim(dim, x.ndim)
    window = tuple(slice(0, k) if d == dim else slice(None) for d in range(x.ndim))
    indices = _argsort(x, dim, largest)[window].contiguous()
    return SortResult(x.gather(dim, indices), indices)
