"""Indexing: x[index] read and written, with PyTorch's rules, and the ops that pick elements by
position (narrow, split, chunk, unbind, select, gather, index_select).

An index is taken apart once (_parse): its ints, slices, None and Ellipsis give a view of x (basic
indexing, no copy), in which the dims indexed by tensors are kept whole; those tensors (integer
index tensors, lists, bool masks) then pick elements of that view by one gather (_Plan), and a
write puts values back by a scatter whose result is copied in through the view. A lone bool mask
goes its own way, without a scatter (ops/masking.py).
"""
import math

from .. import dtypes
from ..autograd import Function, WindowGrad
from . import masking
from .elementwise import where
from .inplace import assign
from .movement import _slice_view, view
from .half import computes_in_float32
from .._tensor import Tensor, _wrap_dim as wrap_dim, tensor_method


# ---- gather / index_select ----
class _Gather(Function):
    def forward(self, x, dim, index):
        self.dim, self.index, self.in_shape = dim, index, x.shape
        return Tensor(x.backend.gather(x._view, dim, index._view), index.shape, x.dtype, x.device)

    def backward(self, grad):
        storage = grad.backend.scatter_add(grad._view, self.dim, self.index._view, self.in_shape)
        return Tensor(storage, self.in_shape, grad.dtype, grad.device), None


def _check_index(name, x, index):
    if not isinstance(index, Tensor):
        raise TypeError(f"{name}: index must be a Tensor, not {type(index).__name__}")
    if index.dtype is not dtypes.int32:
        raise RuntimeError(f"{name}: expected an int32 index tensor, got {index.dtype.name}")
    if index.device != x.device:
        raise RuntimeError(f"{name}: index is on {index.device} but the input is on {x.device}")


@tensor_method
@computes_in_float32
def gather(x, dim, index):
    _check_index("gather", x, index)
    dim = wrap_dim(dim, x.ndim)
    if index.ndim != x.ndim:
        raise RuntimeError(f"gather: index has {index.ndim} dimensions but the input has {x.ndim}")
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != dim and i > s:
            raise RuntimeError(f"gather: index size {i} exceeds input size {s} in dimension {d}")
    return _Gather.apply(x, dim, index)


@tensor_method
@computes_in_float32
def index_select(x, dim, index):
    _check_index("index_select", x, index)
    if index.ndim > 1:
        raise IndexError("index_select: index must be a 1-D tensor")
    dim = wrap_dim(dim, x.ndim)
    index = index.reshape(-1)
    shape = x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:]
    spread = index.reshape((1,) * dim + (-1,) + (1,) * (x.ndim - dim - 1)).expand(shape)
    return _Gather.apply(x, dim, spread)


# ---- slices: views ----
class _Slice(Function):
    """x[starts[d] : starts[d] + sizes[d] * steps[d] : steps[d]] in every dim, as a view."""

    def forward(self, x, starts, sizes, steps):
        self.in_shape, self.window = x.shape, (starts, sizes, steps)
        return _slice_view(x, starts, sizes, steps)

    def backward(self, grad):
        return WindowGrad(grad, self.window, self.in_shape)


def _slice(x, starts, sizes, steps):
    """The window as a view, or x itself for all of x (where a write goes to x, as in torch)."""
    if tuple(starts) == (0,) * x.ndim and tuple(sizes) == x.shape and all(s == 1 for s in steps):
        return x
    return _Slice.apply(x, tuple(starts), tuple(sizes), tuple(steps))


def _new(y, x):
    """y, a new tensor where it is x itself (a read of x[...] is a view of it, not x)."""
    return view(x, x.shape) if y is x else y


@tensor_method
def narrow(x, dim, start, length):
    dim = wrap_dim(dim, x.ndim)
    size = x.shape[dim]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start %= max(size, 1)
    if length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    starts, sizes = [0] * x.ndim, list(x.shape)
    starts[dim], sizes[dim] = start, length
    return _new(_slice(x, starts, sizes, [1] * x.ndim), x)


@tensor_method
def split(x, split_size_or_sections, dim=0):
    dim = wrap_dim(dim, x.ndim)
    size = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and not (step == 0 and size == 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
                               if step == 0 else f"split expects split_size be non-negative, but got split_size={step}")
        sizes = [min(step, size - at) for at in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                               f"at dimension {dim}), but got split_sizes={sizes}")
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return tuple(narrow(x, dim, at, length) for at, length in zip(starts, sizes))


@tensor_method
def chunk(x, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = x.shape[wrap_dim(dim, x.ndim)]
    return split(x, max(1, math.ceil(size / chunks)), dim)


@tensor_method
def select(x, dim, index):
    dim = wrap_dim(dim, x.ndim)
    return getitem(x, (slice(None),) * dim + (index,))


@tensor_method
def unbind(x, dim=0):
    dim = wrap_dim(dim, x.ndim)
    return tuple(select(x, dim, i) for i in range(x.shape[dim]))


# ---- x[index] ----
def getitem(x, index):
    if isinstance(index, Tensor) and index.dtype is dtypes.int32 and index.device == x.device and x.ndim:
        # one int tensor over the first dim (a data set's batch of rows): the index_select that _Plan
        # would make of it, without the parse (half the host time of an eager MNIST step's batch)
        rows = _in_range(index, x.shape[0], 0, {}).reshape(-1)
        return x.index_select(0, rows).reshape(index.shape + x.shape[1:])
    y, entries = _parse(x, index)
    if not entries:
        return _new(y, x)
    if len(entries) == 1 and _is_mask(entries[0][1]):
        return masking.read(y, *entries[0])
    plan = _Plan(y, entries)
    return plan.merged.index_select(plan.at, plan.index.reshape(-1)).reshape(plan.shape)


def setitem(x, index, value):
    """x[index] = value: a number, or a tensor that broadcasts to x[index]'s shape (its dtype and device
    converted), written into x's storage: x and the tensors sharing it see the change."""
    y, entries = _parse(x, index)
    if not isinstance(value, (Tensor, bool, int, float)):
        from .creation import tensor
        value = tensor(value, device=x.device)
    if isinstance(value, Tensor):
        value = value.to(device=y.device, dtype=y.dtype)
        while value.ndim > y.ndim and value.shape[0] == 1:   # leading 1s go, as in torch
            value = value.reshape(value.shape[1:])
    if not entries:
        assign(y, value)
    elif len(entries) == 1 and _is_mask(entries[0][1]):
        masking.write(y, *entries[0], value)
    else:
        _put(y, entries, value, accumulate=False)


@tensor_method
def index_put_(x, indices, values, accumulate=False):
    """x[indices] = values, or with accumulate=True x[indices] += values where repeated places add up."""
    if not accumulate:
        setitem(x, tuple(indices), values)
    else:
        y, entries = _parse(x, tuple(indices))
        _put(y, entries, values.to(device=y.device, dtype=y.dtype), accumulate=True)
    return x


def _is_mask(t):
    return t.dtype is dtypes.bool_ or t.dtype is dtypes.uint8


def _parse(x, index):
    """(y, entries): y the view of x given by index's ints, slices, None and Ellipsis, the dims that
    tensors index kept whole in it; entries, each tensor index (an int32 tensor or a mask) with the
    first of y's dims it indexes."""
    listed = {}   # id(tensor) -> its values, for tensors made from lists: checked here on any device
    items = [_as_index(x, i, listed) for i in (index if isinstance(index, tuple) else (index,))]
    ellipses = sum(1 for i in items if i is Ellipsis)
    used = sum(i.ndim if isinstance(i, Tensor) and _is_mask(i) else 0 if i is None or i is Ellipsis else 1
               for i in items)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    at = next((k for k, i in enumerate(items) if i is Ellipsis), len(items))
    items[at:at + 1] = [slice(None)] * (x.ndim - used)
    starts, sizes, steps, shape, entries, d = [], [], [], [], [], 0
    for item in items:
        if item is None:
            shape.append(1)
            continue
        if isinstance(item, Tensor):
            k = item.ndim if _is_mask(item) else 1
            if _is_mask(item):
                for j, size in enumerate(item.shape):
                    if size != x.shape[d + j]:
                        raise IndexError(f"The shape of the mask {list(item.shape)} at index {j} does not match "
                                         f"the shape of the indexed tensor {list(x.shape)} at index {d + j}")
            entries.append((len(shape), item if _is_mask(item) else _in_range(item, x.shape[d], d, listed)))
            starts, sizes, steps = starts + [0] * k, sizes + list(x.shape[d:d + k]), steps + [1] * k
            shape += x.shape[d:d + k]
            d += k
            continue
        size = x.shape[d]
        if isinstance(item, slice):
            start, stop, step = item.indices(size) if (item.step or 1) > 0 else (0, 0, item.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            count = max(0, (stop - start + step - 1) // step)
            starts.append(start if count else 0)
            sizes.append(count)
            steps.append(step)
            shape.append(count)
        else:
            i = item.__index__()
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {size}")
            starts.append(i % size)
            sizes.append(1)
            steps.append(1)
        d += 1
    y = _slice(x, starts, sizes, steps)
    return (y if y.shape == tuple(shape) else y.reshape(tuple(shape))), entries


def _as_index(x, item, listed):
    """An index item as _parse takes it: lists and ranges as tensors (bool ones as masks), True as None."""
    if item is True:
        return None
    if isinstance(item, (list, range)):
        from .creation import _flatten, tensor
        shape, flat = [], []
        _flatten(list(item), 0, shape, flat)
        kind = dtypes.bool_ if flat and all(isinstance(i, bool) for i in flat) else dtypes.int32
        made = tensor(list(item), dtype=kind, device=x.device)
        listed[id(made)] = flat
        return made
    if isinstance(item, Tensor):
        if item.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return item.to(x.device)
    if item is None or item is Ellipsis or isinstance(item, slice) or hasattr(item, "__index__"):
        return item
    if isinstance(item, (str, bytes)):   # torch tries to make a tensor of it
        raise TypeError(f"invalid data type '{type(item).__name__}' for an index")
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                     f"indices (got {type(item).__name__})")


def _in_range(index, size, dim, listed):
    """index, checked to lie in [-size, size) on the cpu device, or from the list it was made of (on
    webgpu the gather and scatter kernels check it: raised at the first read after them)."""
    values = listed.get(id(index))
    if (values is not None or index.device == "cpu") and index.numel():
        low, high = (min(values), max(values)) if values is not None else (index.min().item(), index.max().item())
        if high >= size or low < -size:
            raise IndexError(f"index {high if high >= size else low} is out of bounds for dimension {dim} "
                             f"with size {size}")
    return index


def _int_tensor(values, device):
    from .creation import tensor
    return tensor(values, dtype=dtypes.int32, device=device)


class _Plan:
    """How y[entries] (int32 index tensors over y's dims, masks among them) is one index_select:
    merged is y with the indexed dims moved to `at` (PyTorch's rule: where the broadcast index's
    dims go in the result) and merged into one dim there, index the broadcast index into it, shape
    the result's shape."""

    def __init__(self, y, entries):
        from .movement import broadcast_shapes
        entries = _unmasked(entries)
        dims = [d for d, _ in entries]
        try:
            index_shape = broadcast_shapes(*[i.shape for _, i in entries])
        except RuntimeError:
            raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                             + ", ".join(str(list(i.shape)) for _, i in entries)) from None
        rest = [d for d in range(y.ndim) if d not in dims]
        # scalar index tensors index like ints: they neither part the others nor place the result
        scalar = {d for d, i in entries if i.ndim == 0}
        spots = [[d for d in range(y.ndim) if d not in scalar].index(d) for d in dims if d not in scalar]
        joined = bool(spots) and spots == list(range(spots[0], spots[0] + len(spots)))
        at = sum(1 for d in rest if d < min(d for d in dims if d not in scalar)) if joined else 0
        self.order = rest[:at] + dims + rest[at:]
        z = y.permute(self.order)
        sizes = [y.shape[d] for d in dims]
        self.at, self.z_shape = at, z.shape
        self.merged = z.reshape(z.shape[:at] + (math.prod(sizes),) + z.shape[at + len(dims):])
        self.shape = z.shape[:at] + tuple(index_shape) + z.shape[at + len(dims):]
        self.index = entries[0][1] if len(entries) == 1 else _linear(entries, sizes)

    def spread(self, values):
        """values broadcast to the result's shape, laid out as merged's (n picked in the merged dim),
        and the index spread to match (for a scatter)."""
        try:
            values = values.expand(self.shape)
        except RuntimeError:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
                               f"to indexing result of shape {list(self.shape)}") from None
        at, m = self.at, self.merged
        values = values.reshape(m.shape[:at] + (-1,) + m.shape[at + 1:])
        index = self.index.reshape((1,) * at + (-1,) + (1,) * (m.ndim - at - 1)).expand(values.shape)
        return values, index

    def unmerge(self, merged):
        """merged, in y's shape and dim order again."""
        z = merged.reshape(self.z_shape)
        return z.permute([self.order.index(d) for d in range(z.ndim)])


def _unmasked(entries):
    """The entries with each k-dim mask as k int32 index tensors (its True elements' coordinates)."""
    out = []
    for d, index in entries:
        if not _is_mask(index):
            out.append((d, index))
            continue
        picked = masking.true_positions(index)
        for j in range(index.ndim):
            step = math.prod(index.shape[j + 1:])
            out.append((d + j, _int_tensor([p // step % index.shape[j] for p in picked], index.device)))
    return out


def _linear(entries, sizes):
    """The broadcast index tensors as one row-major index into their dims merged. On webgpu an index out
    of range in one dim makes the merged index out of range too, for the kernels to find."""
    index, valid = 0, None
    for (_, i), size in zip(entries, sizes):
        wrapped = where(i < 0, i + size, i)
        index = index * size + wrapped
        if i.device != "cpu":   # cpu checked them (_in_range)
            inside = (wrapped >= 0) & (wrapped < size)
            valid = inside if valid is None else valid & inside
    return index if valid is None else where(valid, index, -math.prod(sizes) - 1)


def _put(y, entries, values, accumulate):
    """y[entries] = values (or += with accumulate: repeated places add up), as one scatter into the
    merged dims, copied back into y."""
    from .creation import full
    from .scatter import scatter, scatter_add
    plan = _Plan(y, entries)
    if not isinstance(values, Tensor):
        values = full((), values, dtype=y.dtype, device=y.device)
    values, index = plan.spread(values)
    merged = (scatter_add if accumulate else scatter)(plan.merged, plan.at, index, values)
    assign(y, plan.unmerge(merged))
