"""Movement ops: views that only change (shape, strides, offset), and the ops that move data
between positions (cat, gather, index_select, device copies). Picking elements by index (x[...],
narrow, split, gather, index_select) is ops/indexing.py.

A view shares its input's storage (and names it as its _base, for in-place writes through it); its
backward is the inverse movement of the gradient.
"""
import math

from .. import dtypes
from ..autograd import Function
from .elementwise import IDENTITY
from ..backends.base import contiguous_strides
from .._tensor import Tensor, _wrap_dim as wrap_dim, tensor_method


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
    out = Tensor(x._storage, shape, x.dtype, x.device, strides, offset)
    out._base = x if x._base is None else x._base
    out._base_node = out._base._ctx
    return out


def _shape_args(args):
    """reshape(2, 3) and reshape((2, 3)) both mean the shape (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(a) for a in args)


# ---- reshape ----
class _Reshape(Function):
    def forward(self, x, shape):
        self.in_shape = x.shape
        strides = _view_strides(x.shape, x._strides, shape)
        if strides is None:   # no view has these elements in this shape: a copy does
            return Tensor(x.clone()._storage, shape, x.dtype, x.device)
        return _as_view(x, shape, strides, x._offset)

    def backward(self, grad):
        return grad.reshape(self.in_shape)


def _view_strides(old, strides, shape):
    """The strides that show the elements of a tensor of shape `old` and these strides as `shape`,
    or None where a new dim would span two of its runs of evenly spaced elements (PyTorch's rule)."""
    if not old:
        return (1,) * len(shape)
    if strides == contiguous_strides(old) and math.prod(old):
        return contiguous_strides(shape)
    if math.prod(old) == 0:
        new, step = [], 1
        for size in reversed(shape):
            new.append(step)
            step *= max(size, 1)
        return tuple(reversed(new))
    new = [0] * len(shape)
    view_d, base, tensor_numel, view_numel = len(shape) - 1, strides[-1], 1, 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * base):   # a run ends at d
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                new[view_d] = view_numel * base
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(new) if view_d == -1 else None


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


@tensor_method
def reshape(x, *shape):
    shape = _shape_args(shape)
    if shape == x.shape:
        return x
    shape = _infer_shape(shape, x.numel())
    return x if shape == x.shape else _Reshape.apply(x, shape)


@tensor_method
def view(x, *shape):
    """A view in another shape (PyTorch raises where that needs a copy), or view(dtype)."""
    if len(shape) == 1 and isinstance(shape[0], (dtypes.DType, str)):   # view(dtype): reinterpret the bytes
        return view_dtype(x, shape[0])
    shape = _infer_shape(_shape_args(shape), x.numel())
    if _view_strides(x.shape, x._strides, shape) is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _Reshape.apply(x, shape)


@tensor_method
def view_as(x, other):
    return view(x, other.shape)


@tensor_method
def reshape_as(x, other):
    return reshape(x, other.shape)


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


@tensor_method
def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    start, end = wrap_dim(start_dim, x.ndim), wrap_dim(end_dim, x.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


@tensor_method
def unflatten(x, dim, sizes):
    dim = wrap_dim(dim, x.ndim)
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    try:
        sizes = _infer_shape(sizes, x.shape[dim])
    except RuntimeError:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({x.shape[dim]}) in the input tensor") from None
    return x.reshape(x.shape[:dim] + sizes + x.shape[dim + 1:])


@tensor_method
def squeeze(x, dim=None):
    if dim is None:
        dims = {d for d, s in enumerate(x.shape) if s == 1}
    else:
        dims = {wrap_dim(d, x.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        dims = {d for d in dims if x.shape[d] == 1}
    return x.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))


@tensor_method
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


@tensor_method
def permute(x, *dims):
    dims = tuple(wrap_dim(d, x.ndim) for d in _shape_args(dims))
    if sorted(dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {dims} are not a permutation of {x.ndim} dimensions")
    return x if dims == tuple(range(x.ndim)) else _Permute.apply(x, dims)


@tensor_method
def transpose(x, dim0, dim1):
    dims = list(range(x.ndim))
    a, b = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, dims)


swapaxes = swapdims = Tensor.swapaxes = Tensor.swapdims = transpose


@tensor_method
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return transpose(x, 0, 1) if x.ndim == 2 else x


@tensor_method
def movedim(x, source, destination):
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({source} dims) should contain "
                           f"the same number of dims as destination ({destination} dims)")
    source = [wrap_dim(d, x.ndim) for d in source]
    destination = [wrap_dim(d, x.ndim) for d in destination]
    for name, dims in (("source", source), ("destination", destination)):
        if len(set(dims)) < len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    rest = iter(d for d in range(x.ndim) if d not in source)
    placed = dict(zip(destination, source))
    return permute(x, [placed[d] if d in placed else next(rest) for d in range(x.ndim)])


moveaxis = Tensor.moveaxis = movedim


# ---- expand (broadcasting) ----
class _Expand(Function):
    def forward(self, x, shape):
        self.in_shape = x.shape
        lead = len(shape) - x.ndim
        strides = [0] * lead + [0 if size == 1 and new != 1 else st
                                for size, new, st in zip(x.shape, shape[lead:], x._strides)]
        return _as_view(x, shape, strides, x._offset)

    def backward(self, grad):
        return sum_to(grad, self.in_shape)


def sum_to(grad, shape):
    """A gradient of a broadcast of shape (one that expands to grad's) summed back down to shape."""
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, size in enumerate(shape)
                                      if size == 1 and grad.shape[lead + d] != 1)
    return grad.sum(dims, keepdim=True).reshape(shape) if dims else grad


@tensor_method
def expand(x, *shape):
    shape = _shape_args(shape)
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


@tensor_method
def expand_as(x, other):
    return expand(x, other.shape)


# ---- writes ----
def _slice_view(x, starts, sizes, steps):
    offset = x._offset + sum(s * st for s, st in zip(starts, x._strides))
    return _as_view(x, sizes, tuple(st * step for st, step in zip(x._strides, steps)), offset)


def write_into(target, source):
    """Copy source's values into the view `target` (a kernel writing through target's strides). A raw
    write, for filling fresh tensors and for state updated outside autograd: in-place ops that
    autograd and the version counter see go through ops/inplace.py."""
    target.backend.map(IDENTITY, (source._view,), target.shape, source.dtype, target.dtype, out=target._view)


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
            grads.append(grad.narrow(self.dim, at, size))
            at += size
        return tuple(grads)


def _narrow_view(x, dim, start, length):
    starts = [0] * x.ndim
    sizes = list(x.shape)
    starts[dim], sizes[dim] = start, length
    return _slice_view(x, starts, tuple(sizes), (1,) * x.ndim)


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
