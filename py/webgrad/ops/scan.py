"""Running reductions along a dim: cumsum, one kernel each way (backend.cumsum: shaders/scan.wgsl);
its gradient is the running sum of the gradient from the other end."""
from ..amp import autocast_op
from .. import dtypes
from ..autograd import Function
from .movement import wrap_dim
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
    if dtype is not None:
        x = x.to(dtype)
    elif not x.dtype.is_floating_point:
        x = x.to(dtypes.int32)
    if x.ndim == 0:
        wrap_dim(dim, 0)
        return x.clone()
    return _CumSum.apply(x, wrap_dim(dim, x.ndim))
