"""Running reductions along a dim: cumsum, one kernel each way (backend.cumsum: shaders/scan.wgsl),
its gradient the running sum of the gradient from the other end; cumprod, of elementwise products."""
from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .creation import ones
from .movement import cat, wrap_dim
from .half import computes_in_float32
from .._tensor import Tensor, tensor_method


class _CumSum(Function):
    def forward(self, x, dim):
        self.dim = dim
        return Tensor(x.backend.cumsum(x._view, dim), x.shape, x.dtype, x.device)

    def backward(self, grad):
        return Tensor(grad.backend.cumsum(grad._view, self.dim, reverse=True), grad.shape, grad.dtype, grad.device)


@tensor_method
@autocast_op
@computes_in_float32
def cumsum(x, dim, *, dtype=None):
    """Integer and bool inputs sum as int32 (PyTorch's int64), floats in their own dtype."""
    x, dim = _scanned(x, dim, dtype)
    return x.clone() if dim is None else _CumSum.apply(x, dim)


@tensor_method
@autocast_op
def cumprod(input, dim, *, dtype=None):
    """The running product along dim, by doubling: after the step with shift s each place holds the
    product of the 2s places up to it (log2(n) elementwise passes, exact with zeros and negatives,
    and differentiable as they are)."""
    input, dim = _scanned(input, dim, dtype)
    if dim is None or input.shape[dim] < 2:
        return input.clone()
    size, out, shift = input.shape[dim], input, 1
    while shift < size:
        lead = ones(input.shape[:dim] + (shift,) + input.shape[dim + 1:], dtype=out.dtype, device=out.device)
        out = out * cat([lead, out.narrow(dim, 0, size - shift)], dim)
        shift *= 2
    return out


def _scanned(x, dim, dtype):
    """(x as a running op takes it: cast to dtype, else integers and bools to int32 (PyTorch's int64);
    dim wrapped, None for a 0-d x)."""
    if dtype is not None:
        x = x.to(dtype)
    elif not x.dtype.is_floating_point:
        x = x.to(dtypes.int32)
    if x.ndim == 0:
        wrap_dim(dim, 0)
        return x, None
    return x, wrap_dim(dim, x.ndim)
