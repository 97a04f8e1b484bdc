"""torch's arrangement helpers built from views, cat, gather and where: eye, tril_indices and
triu_indices, diag, diagonal (a view), the atleast_*d family and the stacks (hstack, vstack,
column_stack, dstack), broadcast_to, meshgrid, rot90, diff, take_along_dim, repeat_interleave,
index_add and index_fill; and torch's memory formats. Each is a composition of ops that already
run on both devices, so their gradients come with them."""
import itertools

from .. import dtypes
from ..backends import get_backend, resolve_device
from ..autograd import Function
from .creation import arange, tensor, zeros
from ..dtypes import TYPE_NAMES
from .inplace import assign
from .elementwise import where
from .movement import _as_view, broadcast_shapes, cat, expand, wrap_dim, write_into
from .rearrange import flip
from .._tensor import Tensor, tensor_method


class memory_format:
    """torch.memory_format (channels_last, ...): a request for a dims order in memory. webgrad's
    kernels read any strides, so Tensor.to, Tensor.contiguous and Module.to take one and keep the
    layout they have."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"webgrad.{self.name}"


contiguous_format, preserve_format = memory_format("contiguous_format"), memory_format("preserve_format")
channels_last, channels_last_3d = memory_format("channels_last"), memory_format("channels_last_3d")


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The n x m identity (m defaults to n)."""
    m = n if m is None else m
    for name, size in (("n", n), ("m", m)):
        if size < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {size}")
    rows, cols = arange(n, device=device), arange(m, device=device)
    out = (rows.unsqueeze(1) == cols).to(dtype or dtypes.float32)
    return out.requires_grad_() if requires_grad else out


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, n) row and column positions of a row x col matrix's lower triangle (below the
    diagonal shifted by offset), row by row."""
    return _triangle_indices(row, col, [(0, i + offset + 1) for i in range(max(row, 0))], dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    return _triangle_indices(row, col, [(i + offset, col) for i in range(max(row, 0))], dtype, device)


def _triangle_indices(row, col, spans, dtype, device):
    """spans: each row's [first, end) of columns, clipped here to the matrix."""
    for name, size in (("row", row), ("col", col)):
        if size < 0:
            raise RuntimeError(f"{name} must be non-negative, got{size}")   # torch's words
    spans = [(max(first, 0), min(end, col)) for first, end in spans]
    count = sum(max(end - first, 0) for first, end in spans)
    dtype = dtype or dtypes.int32
    # the device refuses a size it cannot hold before the host lists a billion positions
    get_backend(resolve_device(device)).check_fits((2, count), dtype)
    rows = list(itertools.chain.from_iterable(itertools.repeat(i, end - first) for i, (first, end) in enumerate(spans)))
    cols = list(itertools.chain.from_iterable(range(first, end) for first, end in spans))
    return tensor([rows, cols], dtype=dtype, device=device).reshape(2, count)


# ---- diagonals ----
class _Diagonal(Function):
    """The diagonal of dims dim1, dim2 shifted by offset, as a view (the last dim of the result);
    its gradient is zeros with the gradient written along that diagonal."""

    def forward(self, x, offset, dim1, dim2):
        self.in_shape, self.plan = x.shape, (offset, dim1, dim2)
        return _diagonal_view(x, offset, dim1, dim2, _as_view)

    def backward(self, grad):
        whole = zeros(self.in_shape, dtype=grad.dtype, device=grad.device)
        write_into(_diagonal_view(whole, *self.plan, _raw_view), grad)
        return whole


def _raw_view(x, shape, strides, offset):
    return Tensor(x._storage, shape, x.dtype, x.device, strides, offset)


def _diagonal_view(x, offset, dim1, dim2, view):
    rows, cols = x.shape[dim1], x.shape[dim2]
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    start = x._offset + (offset * x._strides[dim2] if offset >= 0 else -offset * x._strides[dim1])
    rest = [d for d in range(x.ndim) if d not in (dim1, dim2)]
    shape = tuple(x.shape[d] for d in rest) + (length,)
    strides = tuple(x._strides[d] for d in rest) + (x._strides[dim1] + x._strides[dim2],)
    return view(x, shape, strides, start if length else x._offset)


@tensor_method
def diagonal(input, offset=0, dim1=0, dim2=1):
    dim1, dim2 = wrap_dim(dim1, input.ndim), wrap_dim(dim2, input.ndim)
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _Diagonal.apply(input, offset, dim1, dim2)


@tensor_method
def diag(input, diagonal=0):
    """A 1-D input's values placed on a square matrix's diagonal (shifted by `diagonal`), or a 2-D
    input's diagonal (a copy)."""
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    if input.ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    k, size = abs(diagonal), input.shape[0] + abs(diagonal)
    pad = zeros(k, dtype=input.dtype, device=input.device)
    # along each row, the value at column j is input[j - diagonal] (the padding where out of range)
    row = cat([pad, input] if diagonal >= 0 else [input, pad])
    place = arange(size, device=input.device)
    on_diagonal = (place - place.unsqueeze(1)) == diagonal
    return where(on_diagonal, row, zeros((), dtype=input.dtype, device=input.device))


# ---- stacking ----
def atleast_1d(*tensors):
    return _each(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors):
    return _each(tensors, lambda t: t.reshape((1,) * (2 - t.ndim) + tuple(t.shape)) if t.ndim < 2 else t)


def atleast_3d(*tensors):
    def lift(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.unsqueeze(-1) if t.ndim == 2 else t
    return _each(tensors, lift)


def _each(tensors, fn):
    """torch's atleast_*d: one tensor gives one; several, or a sequence, give a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fn(tensors[0])
    items = tensors[0] if len(tensors) == 1 else tensors
    return tuple(fn(t) for t in items)


def _sequence(name, tensors):
    if isinstance(tensors, Tensor) or not len(tensors):
        raise TypeError(f"{name}(): argument 'tensors' must be a non-empty sequence of Tensors")
    return list(tensors)


def hstack(tensors):
    tensors = [atleast_1d(t) for t in _sequence("hstack", tensors)]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([atleast_2d(t) for t in _sequence("vstack", tensors)], 0)


def dstack(tensors):
    return cat([atleast_3d(t) for t in _sequence("dstack", tensors)], 2)


def column_stack(tensors):
    return hstack([t.reshape(-1, 1) if t.ndim <= 1 else t for t in _sequence("column_stack", tensors)])


row_stack = vstack


@tensor_method
def broadcast_to(input, size):
    return expand(input, size)


def meshgrid(*tensors, indexing="ij"):
    """Each of n 1-D tensors expanded over the grid of all their sizes ('ij': the first varies along
    dim 0; 'xy': the first two swapped, as NumPy's)."""
    if len(tensors) == 1 and not isinstance(tensors[0], Tensor):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"webgrad.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"webgrad.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
    tensors = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors[0], tensors[1] = tensors[1], tensors[0]
    shape = tuple(t.shape[0] for t in tensors)
    grids = [t.reshape((1,) * d + (-1,) + (1,) * (len(tensors) - d - 1)).expand(shape)
             for d, t in enumerate(tensors)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@tensor_method
def rot90(input, k=1, dims=(0, 1)):
    """Rotated by 90 degrees k times, from the first of dims toward the second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = wrap_dim(dims[0], input.ndim), wrap_dim(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    k %= 4
    if k == 1:
        return flip(input, b).transpose(a, b)
    if k == 2:
        return flip(input, a, b)
    if k == 3:
        return flip(input, a).transpose(a, b)
    return input.clone()


@tensor_method
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (bools: whether neighbours differ)."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    dim = wrap_dim(dim, input.ndim)
    parts = [t for t in (prepend, input, append) if t is not None]
    if any(t.ndim != input.ndim for t in parts):
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    out = cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        size = out.shape[dim]
        if size == 0:
            break
        later, earlier = out.narrow(dim, 1, size - 1), out.narrow(dim, 0, size - 1)
        out = later != earlier if out.dtype is dtypes.bool_ else later - earlier
    return out


@tensor_method
def take_along_dim(input, indices, dim=None):
    """input's values at indices along dim (both flattened where dim is None), the other dims
    broadcast between them."""
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    dim = wrap_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError("webgrad.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    shape = list(broadcast_shapes(input.shape[:dim] + (1,) + input.shape[dim + 1:],
                                  indices.shape[:dim] + (1,) + indices.shape[dim + 1:]))
    input = input.expand(shape[:dim] + [input.shape[dim]] + shape[dim + 1:])
    indices = indices.expand(shape[:dim] + [indices.shape[dim]] + shape[dim + 1:])
    return input.gather(dim, indices)


@tensor_method
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) repeated; repeats a number, or a tensor of one count per
    element (read back: the counts make the result's size). With only a tensor of counts, the
    positions 0, 1, ... each repeated that many times."""
    if repeats is None:
        counts = input.tolist()
        return tensor([i for i, c in enumerate(counts) for _ in range(c)], dtype=dtypes.int32, device=input.device)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = wrap_dim(dim, input.ndim)
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("repeats can not be negative")
        shape = input.shape
        spread = input.unsqueeze(dim + 1).expand(shape[:dim + 1] + (repeats,) + shape[dim + 1:])
        return spread.reshape(shape[:dim] + (shape[dim] * repeats,) + shape[dim + 1:])
    counts = repeats.tolist()
    if repeats.ndim != 1 or len(counts) != input.shape[dim]:
        raise RuntimeError("repeats must have the same size as input along dim")
    if any(c < 0 for c in counts):
        raise RuntimeError("repeats can not be negative")
    positions = tensor([i for i, c in enumerate(counts) for _ in range(c)], dtype=dtypes.int32, device=input.device)
    return input.index_select(dim, positions)


# ---- index_add / index_fill ----
def _index_add_checked(x, dim, index, source):
    """dim wrapped and index flattened, with torch's refusals of a non-vector or float index."""
    if index.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{TYPE_NAMES[index.dtype.name]} and size: {list(index.shape)}")
    if index.dtype.is_floating_point:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{TYPE_NAMES[index.dtype.name]}")
    dim, index = wrap_dim(dim, x.ndim), index.reshape(-1)
    if source.ndim and source.shape[dim] != index.shape[0]:
        raise RuntimeError(f"index_add_(): Number of indices ({index.shape[0]}) should be equal to source.size(dim): "
                           f"({source.shape[dim]}), for dim: {dim}")
    return dim, index


def _index_fill_checked(x, dim, index):
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if index.dtype.is_floating_point:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    return wrap_dim(dim, x.ndim), index.reshape(-1)


@tensor_method
def index_add(input, dim, index, source, *, alpha=1):
    """input plus source's slices along dim added at the positions index names (repeats add up)."""
    dim, index = _index_add_checked(input, dim, index, source)
    spread = index.reshape((1,) * dim + (-1,) + (1,) * (source.ndim - dim - 1)).expand(source.shape)
    return input.scatter_add(dim, spread, source if alpha == 1 else source * alpha)


@tensor_method
def index_add_(input, dim, index, source, *, alpha=1):
    return assign(input, index_add(input, dim, index, source, alpha=alpha))


def _picked(x, dim, index):
    """A bool tensor, True along dim at the positions index names, shaped to broadcast with x."""
    places = arange(x.shape[dim], device=x.device)
    hit = (places.unsqueeze(1) == index.to(dtypes.int32)).any(1)
    return hit.reshape((1,) * dim + (-1,) + (1,) * (x.ndim - dim - 1))


@tensor_method
def index_fill(input, dim, index, value):
    dim, index = _index_fill_checked(input, dim, index)
    return where(_picked(input, dim, index), value, input).to(input.dtype)


@tensor_method
def index_fill_(input, dim, index, value):
    dim, index = _index_fill_checked(input, dim, index)
    return input.masked_fill_(_picked(input, dim, index), value)
