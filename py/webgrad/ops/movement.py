"""Movement ops: views that only change (shape, strides, offset), and the ops that move data
between positions (cat, gather, index_select, device copies).

A view shares its input's storage; its backward is the inverse movement of the gradient.
"""
import math

from .. import dtypes
from ..autograd import Function
from .elementwise import IDENTITY
from .._tensor import Tensor, _wrap_dim as wrap_dim


def broadcast_shapes(*shapes):
    ndim = max(len(s) for s in shapes)
    out = []
    for sizes in zip(*[(1,) * (ndim - len(s)) + tuple(s) for s in shapes]):
        big = {s for s in sizes if s != 1}
        if len(big) > 1:
            raise RuntimeError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _as_view(x, shape, strides, offset):
    return Tensor(x._storage, shape, x.dtype, x.device, strides, offset)


# ---- reshape ----
class _Reshape(Function):
    def forward(self, x, shape):
        self.in_shape = x.shape
        strides = None
        if not x.is_contiguous():
            strides = _unit_dim_strides(x, shape)
            if strides is None:
                x = x.clone()
        return _as_view(x, shape, strides, x._offset)

    def backward(self, grad):
        return grad.reshape(self.in_shape)


def _unit_dim_strides(x, shape):
    """Strides that view x as `shape` without a copy when the two differ only in size-1 dims (x[:, 0],
    squeeze and unsqueeze of strided views), else None."""
    if [s for s in shape if s != 1] != [s for s in x.shape if s != 1]:
        return None
    kept = iter([st for size, st in zip(x.shape, x._strides) if size != 1])
    return tuple(0 if s == 1 else next(kept) for s in shape)


def _infer_shape(shape, numel):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel or any(s < 0 for s in shape):
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def reshape(x, shape):
    shape = _infer_shape(tuple(shape), x.numel())
    return x if shape == x.shape else _Reshape.apply(x, shape)


def view(x, shape):
    if not x.is_contiguous():
        raise RuntimeError("view size is not compatible with input tensor's size and stride; "
                           "use .reshape(...) instead")
    return reshape(x, shape)


_BITCASTABLE = (dtypes.float32, dtypes.int32, dtypes.uint8)


def view_dtype(x, dtype):
    """Tensor.view(dtype): the same bytes read as another dtype, no copy (PyTorch's rules: with a
    different element size the last dim must be contiguous and scales by the size ratio). For
    raw data, e.g. uint8 images kept packed four to an int32 so rows can be index_selected."""
    dtype = dtypes.as_dtype(dtype)
    if dtype is x.dtype:
        return x
    if x.dtype not in _BITCASTABLE or dtype not in _BITCASTABLE:
        raise TypeError(f"view(dtype): only {', '.join(d.name for d in _BITCASTABLE)} can be reinterpreted, "
                        f"not {x.dtype.name} as {dtype.name}")
    if x.requires_grad:
        raise RuntimeError("view(dtype) is not differentiable; call it on a tensor that does not require grad")
    old, new = x.dtype.itemsize, dtype.itemsize
    shape, offset = list(x.shape), x._offset
    strides = [0 if size == 1 else st for size, st in zip(x.shape, x._strides)]   # unused strides
    if old != new:
        if not shape or (shape[-1] != 1 and strides[-1] != 1):
            raise RuntimeError(f"view(dtype): viewing {x.dtype.name} as {dtype.name} needs a last dim of "
                               f"stride 1, got shape {tuple(x.shape)} with strides {x._strides}")
        strides[-1] = 1
    if new < old:
        ratio = old // new
        shape[-1] *= ratio
        strides = [st * ratio for st in strides[:-1]] + [1]
        offset *= ratio
    elif new > old:
        ratio = new // old
        if shape[-1] % ratio or offset % ratio or any(st % ratio for st in strides[:-1]):
            raise RuntimeError(f"view(dtype): {x.dtype.name} of shape {tuple(x.shape)} (strides {x._strides}, "
                               f"offset {x._offset}) does not split into whole {dtype.name} elements")
        shape[-1] //= ratio
        strides = [st // ratio for st in strides[:-1]] + [1]
        offset //= ratio
    return Tensor(x.backend.bitcast(x._storage, dtype), tuple(shape), dtype, x.device, strides, offset)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    start, end = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


def squeeze(x, dim=None):
    if dim is None:
        dims = {d for d, s in enumerate(x.shape) if s == 1}
    else:
        dims = {wrap_dim(d, x.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        dims = {d for d in dims if x.shape[d] == 1}
    return x.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))


def unsqueeze(x, dim):
    dim = wrap_dim(dim, x.ndim + 1)
    return x.reshape(x.shape[:dim] + (1,) + x.shape[dim:])


# ---- permute ----
class _Permute(Function):
    def forward(self, x, dims):
        self.inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
        return _as_view(x, tuple(x.shape[d] for d in dims), tuple(x._strides[d] for d in dims), x._offset)

    def backward(self, grad):
        return grad.permute(self.inverse)


def permute(x, dims):
    dims = tuple(wrap_dim(d, x.ndim) for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {dims} are not a permutation of {x.ndim} dimensions")
    return x if dims == tuple(range(x.ndim)) else _Permute.apply(x, dims)


def transpose(x, dim0, dim1):
    dims = list(range(x.ndim))
    a, b = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, dims)


# ---- expand (broadcasting) ----
class _Expand(Function):
    def forward(self, x, shape):
        self.in_shape = x.shape
        lead = len(shape) - x.ndim
        strides = [0] * lead + [0 if size == 1 and new != 1 else st
                                for size, new, st in zip(x.shape, shape[lead:], x._strides)]
        return _as_view(x, shape, strides, x._offset)

    def backward(self, grad):
        lead = grad.ndim - len(self.in_shape)
        dims = tuple(range(lead)) + tuple(lead + d for d, size in enumerate(self.in_shape)
                                          if size == 1 and grad.shape[lead + d] != 1)
        return grad.sum(dims, keepdim=True).reshape(self.in_shape) if dims else grad


def expand(x, shape):
    shape = tuple(shape)
    if len(shape) < x.ndim:
        raise RuntimeError(f"expand: the number of sizes provided ({len(shape)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.ndim})")
    lead = len(shape) - x.ndim
    shape = shape[:lead] + tuple(x.shape[i] if s == -1 else s for i, s in enumerate(shape[lead:]))
    for size, new in zip(x.shape, shape[lead:]):
        if size != 1 and size != new:
            raise RuntimeError(f"expand: the expanded size of the tensor ({new}) must match the existing "
                               f"size ({size}) at a non-singleton dimension; shapes {tuple(x.shape)} and {shape}")
    return x if shape == x.shape else _Expand.apply(x, shape)


# ---- basic indexing: ints, slices with steps, None, Ellipsis ----
class _Slice(Function):
    """x[starts[d] : starts[d] + sizes[d] * steps[d] : steps[d]] in every dim, as a view."""

    def forward(self, x, starts, sizes, steps):
        self.in_shape, self.window = x.shape, (starts, sizes, steps)
        return _slice_view(x, starts, sizes, steps)

    def backward(self, grad):
        from .creation import zeros
        out = zeros(self.in_shape, dtype=grad.dtype, device=grad.device)
        write_into(_slice_view(out, *self.window), grad)
        return out


def _slice_view(x, starts, sizes, steps):
    offset = x._offset + sum(s * st for s, st in zip(starts, x._strides))
    return _as_view(x, sizes, tuple(st * step for st, step in zip(x._strides, steps)), offset)


def write_into(target, source):
    """Copy source's values into the view `target` (a kernel writing through target's strides)."""
    target.backend.map(IDENTITY, (source._view,), target.shape, source.dtype, target.dtype, out=target._view)


def getitem(x, index):
    if isinstance(index, (Tensor, list)):
        return _index_with_tensor(x, index)
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, (Tensor, list)) for i in index):
        raise TypeError("indexing with a tensor is supported only as the sole index (x[idx])")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    if index.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (x.ndim - n_real) + index[at + 1:]
    else:
        index = index + (slice(None),) * (x.ndim - n_real)
    starts, sizes, steps, out_shape = [], [], [], []
    dim = 0
    for item in index:
        if item is None:
            out_shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(size) if (item.step or 1) > 0 else (0, 0, item.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            count = max(0, (stop - start + step - 1) // step)
            starts.append(start if count else 0)
            sizes.append(count)
            steps.append(step)
            out_shape.append(count)
        elif isinstance(item, int) or hasattr(item, "__index__"):
            i = int(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            starts.append(i % size)
            sizes.append(1)
            steps.append(1)
        elif isinstance(item, float):   # torch's class for a float index; other types are TypeErrors
            raise IndexError(f"only integers, slices, ellipsis, None and integer or bool tensors are valid "
                             f"indices (got float {item})")
        else:
            raise TypeError(f"invalid index of type {type(item).__name__}")
        dim += 1
    out = x
    if (tuple(starts), tuple(sizes)) != ((0,) * x.ndim, tuple(x.shape)) or any(s != 1 for s in steps):
        out = _Slice.apply(x, tuple(starts), tuple(sizes), tuple(steps))
    return out.reshape(tuple(out_shape))


def _index_with_tensor(x, index):
    if isinstance(index, list):
        index = _list_index(x, index)
    if index.dtype is dtypes.bool_:
        raise TypeError("boolean mask indexing is not supported; use webgrad.where")
    if index.dtype.is_floating_point:
        raise IndexError("tensors used as indices must be integer tensors")
    flat = index_select(x, 0, index.reshape(-1))
    return flat.reshape(tuple(index.shape) + tuple(x.shape[1:]))


def _list_index(x, index):
    """x[[i, j, ...]]: the positions are host data, so they are checked here (a GPU gather cannot raise);
    an empty list selects nothing, as in torch."""
    from .creation import _flatten, tensor
    shape, flat = [], []
    _flatten(index, 0, shape, flat)
    if not flat:
        return tensor(index, dtype=dtypes.int32, device=x.device)
    if all(isinstance(i, int) and not isinstance(i, bool) for i in flat):
        size = x.shape[0] if x.ndim else 0
        bad = next((i for i in flat if not -size <= i < size), None)
        if bad is not None:
            raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {size}")
    return tensor(index, device=x.device)


# ---- cat / stack ----
class _Cat(Function):
    def forward(self, dim, *tensors):
        first = tensors[0]
        shape = list(first.shape)
        shape[dim] = sum(t.shape[dim] for t in tensors)
        out = Tensor(first.backend.empty(math.prod(shape), first.dtype), tuple(shape), first.dtype, first.device)
        self.dim, self.sizes, at = dim, [t.shape[dim] for t in tensors], 0
        for t in tensors:
            if t.numel():
                write_into(_narrow_view(out, dim, at, t.shape[dim]), t)
            at += t.shape[dim]
        return out

    def backward(self, grad):
        grads, at = [], 0
        for size in self.sizes:
            grads.append(_narrow(grad, self.dim, at, size))
            at += size
        return tuple(grads)


def _narrow_view(x, dim, start, length):
    starts = [0] * x.ndim
    sizes = list(x.shape)
    starts[dim], sizes[dim] = start, length
    return _slice_view(x, starts, tuple(sizes), (1,) * x.ndim)


def _narrow(x, dim, start, length):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, start + length)
    return x[tuple(index)]


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat expects a non-empty list of tensors")
    first = tensors[0]
    for position, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"cat: zero-dimensional tensor (at position {position}) cannot be concatenated; "
                               "use stack")
    dim = wrap_dim(dim, first.ndim)
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != dim):
            raise RuntimeError(f"cat: sizes of tensors must match except in dimension {dim}; "
                               f"got {tuple(first.shape)} and {tuple(t.shape)}")
        if t.device != first.device:
            raise RuntimeError(f"cat: expected all tensors on the same device, got {first.device} and {t.device}")
    dtype = first.dtype
    for t in tensors[1:]:
        dtype = dtypes.promote(dtype, t.dtype)
    return _Cat.apply(dim, *[t.to(dtype) for t in tensors])


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack expects a non-empty list of tensors")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise RuntimeError(f"stack expects each tensor to be equal size, got "
                           f"{[tuple(t.shape) for t in tensors]}")
    dim = wrap_dim(dim, tensors[0].ndim + 1)
    return cat([t.unsqueeze(dim) for t in tensors], dim)


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


def gather(x, dim, index):
    _check_index("gather", x, index)
    dim = wrap_dim(dim, x.ndim)
    if index.ndim != x.ndim:
        raise RuntimeError(f"gather: index has {index.ndim} dimensions but the input has {x.ndim}")
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != dim and i > s:
            raise RuntimeError(f"gather: index size {i} exceeds input size {s} in dimension {d}")
    return _Gather.apply(x, dim, index)


def index_select(x, dim, index):
    _check_index("index_select", x, index)
    if index.ndim > 1:
        raise IndexError("index_select: index must be a 1-D tensor")
    dim = wrap_dim(dim, x.ndim)
    index = index.reshape(-1)
    shape = x.shape[:dim] + (index.shape[0],) + x.shape[dim + 1:]
    spread = index.reshape((1,) * dim + (-1,) + (1,) * (x.ndim - dim - 1)).expand(shape)
    return _Gather.apply(x, dim, spread)


# ---- devices ----
class _ToDevice(Function):
    def forward(self, x, device):
        from ..backends import get_backend
        self.source = x.device
        storage = get_backend(device).upload(x.backend.download(x._view), x.dtype)
        return Tensor(storage, x.shape, x.dtype, device)

    def backward(self, grad):
        return grad.to(self.source)


def to_device(x, device):
    return _ToDevice.apply(x, device)
