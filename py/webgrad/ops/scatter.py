"""scatter_add and scatter (and in place) along a dim by an index, and one_hot. They run on the
gather family's scatter-add kernel (backend.scatter_add, gather's adjoint); src's gradient is
gather's, at the index."""
from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .elementwise import where
from .inplace import assign
from .movement import wrap_dim
from .half import computes_in_float32
from .._tensor import Tensor, tensor_method


class _Scattered(Function):
    """src's values summed into zeros of `shape` at the index along dim."""

    def forward(self, src, dim, index, shape):
        self.dim, self.index = dim, index
        return Tensor(src.backend.scatter_add(src._view, dim, index._view, shape), shape, src.dtype, src.device)

    def backward(self, grad):
        return grad.gather(self.dim, self.index), None


def _check(name, x, dim, index, src):
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int32:
        kind = index.dtype.name if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{name}(): Expected dtype int32 (webgrad's int64) for index, got {kind}")
    if index.ndim != x.ndim or (isinstance(src, Tensor) and src.ndim != x.ndim):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    dim = wrap_dim(dim, x.ndim)
    for d, size in enumerate(index.shape):
        if (d != dim and size > x.shape[d]) or (isinstance(src, Tensor) and size > src.shape[d]):
            raise RuntimeError(f"{name}(): Expected index {tuple(index.shape)} to be smaller than self "
                               f"{tuple(x.shape)} apart from dimension {dim} and to be smaller size than src "
                               f"{tuple(src.shape) if isinstance(src, Tensor) else ()}")
    return dim


def _scattered(src, dim, index, shape):
    """src (cut to the index's extent) summed into zeros of shape at the index."""
    window = tuple(slice(0, s) for s in index.shape)
    return _Scattered.apply(src[window] if src.shape != index.shape else src, dim, index, shape)


@tensor_method
@autocast_op
@computes_in_float32
def scatter_add(x, dim, index, src):
    """x plus src's elements added at the index along dim (repeated indices add up)."""
    dim = _check("scatter_add", x, dim, index, src)
    return x + _scattered(src.to(x.dtype), dim, index, tuple(x.shape))


@tensor_method
@computes_in_float32
def scatter(x, dim, index, src=None, *, value=None, reduce=None):
    """x with src's elements (or value) written at the index along dim. Where the index repeats a
    place, PyTorch leaves which write wins undefined; here the place gets their mean."""
    if reduce == "add":
        return scatter_add(x, dim, index, src)
    if reduce is not None:
        raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported (only 'add')")
    if src is None and value is None:
        raise TypeError("scatter() needs src or value")
    if not isinstance(src, Tensor):
        src, value = None, src if value is None else value
    dim = _check("scatter", x, dim, index, src)
    from .creation import ones
    hits = _scattered(ones(index.shape, device=x.device), dim, index, tuple(x.shape))
    if src is None:
        return where(hits > 0, value, x).to(x.dtype)
    placed = _scattered(src.to(dtypes.float32 if not src.dtype.is_floating_point else src.dtype), dim, index,
                        tuple(x.shape))
    return where(hits > 0, placed / hits.clamp(min=1.0), x).to(x.dtype)


@tensor_method
def scatter_(x, dim, index, src=None, *, value=None, reduce=None):
    return assign(x, scatter(x, dim, index, src, value=value, reduce=reduce))


@tensor_method
def scatter_add_(x, dim, index, src):
    return assign(x, scatter_add(x, dim, index, src))


def one_hot(tensor, num_classes=-1):
    """int32 (PyTorch's int64) one-hot rows along a new last dim. num_classes=-1 reads the largest
    class back from the device. Class values are checked on the cpu device; on webgpu (as on CUDA,
    where PyTorch leaves it to a device assert) a class outside [0, num_classes) gives a zero row."""
    from .creation import arange
    if tensor.dtype is not dtypes.int32:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if not tensor.numel():
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.device == "cpu" and tensor.numel():
        if tensor.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if tensor.max().item() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (tensor.unsqueeze(-1) == arange(num_classes, device=tensor.device)).to(dtypes.int32)
