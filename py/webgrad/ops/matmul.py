"""Matrix product with PyTorch's rules: 1-D operands are promoted and squeezed back, batch
dims broadcast. The backend multiplies (*B, M, K) @ (*B, K, N) with any strides, so the
transposes in the backward pass are free views. Linear and conv2d add their bias in the same
kernel (matmul_with_bias): one dispatch fewer each, and no pass over the output."""
import math

from ..amp import autocast_op
from ..autograd import Function
from .movement import broadcast_shapes
from .._tensor import Tensor


class _MatMul(Function):
    def forward(self, a, b, bias=None, bias_dim=-1):
        """bias: None, or 1-D along the output's columns (bias_dim -1) or rows (-2)."""
        self.a, self.b, self.bias, self.bias_dim = a, b, bias, bias_dim
        shape = a.shape[:-1] + (b.shape[-1],)
        storage = a.backend.matmul(a._view, b._view, None if bias is None else bias._view, bias_dim)
        return Tensor(storage, shape, a.dtype, a.device)

    def backward(self, grad):
        a, b = self.a, self.b
        # A gradient comes out in its operand's layout: a transposed weight (x @ w.T in Linear) gets
        # (grad.mT @ x).mT, a view whose storage is w's layout, so the optimizer needs no copy.
        ga = gb = None
        if a.requires_grad:
            ga = (b @ grad.mT).mT if _transposed(a) else grad @ b.mT
        if b.requires_grad:
            gb = (grad.mT @ a).mT if _transposed(b) else a.mT @ grad
        if self.bias is None or not self.bias.requires_grad:
            return ga, gb
        kept = grad.ndim + self.bias_dim
        return ga, gb, grad.sum(tuple(d for d in range(grad.ndim) if d != kept)), None


def _transposed(t):
    """A 2-D view of a row-major matrix's transpose: its first dim is the contiguous one."""
    return t.ndim == 2 and t._strides[0] == 1 and t._strides[1] != 1


@autocast_op
def matmul(a, b):
    return matmul_with_bias(a, b)


def matmul_with_bias(a, b, bias=None, bias_dim=-1):
    """a @ b, plus bias (1-D) broadcast along the product's columns (bias_dim -1, as Linear's) or
    rows (-2, as conv2d's im2col product's), all in one kernel."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be Tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension")
    if a.device != b.device:
        raise RuntimeError(f"matmul: expected both tensors on the same device, got {a.device} and {b.device}")
    if a.dtype is not b.dtype or not a.dtype.is_floating_point:
        raise RuntimeError(f"matmul: expected two floating point tensors of one dtype, got "
                           f"{a.dtype.name} and {b.dtype.name}")
    squeeze = []
    if a.ndim == 1:
        a, squeeze = a.unsqueeze(0), squeeze + [-2]
    if b.ndim == 1:
        b, squeeze = b.unsqueeze(1), squeeze + [-1]
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied "
                           f"({a.shape[-1]} != {b.shape[-2]})")
    if a.ndim > 2 and b.ndim == 2 and bias_dim == -1:
        # As torch.matmul: a stack of rows times one matrix is one product of all the rows, so a
        # Linear on (B, T, C) gets its weight gradient as one product over K = B*T, not as B
        # products and a sum over B copies of the gradient.
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
        out = _product(rows, b, bias, bias_dim).view(*a.shape[:-1], b.shape[-1])
    else:
        if a.shape[:-2] != b.shape[:-2]:
            batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a, b = a.expand(batch + a.shape[-2:]), b.expand(batch + b.shape[-2:])
        out = _product(a, b, bias, bias_dim)
    for dim in squeeze:
        out = out.squeeze(dim if dim == -1 or len(squeeze) == 1 else -1)
    return out


def _product(a, b, bias, bias_dim):
    """(*B, M, K) @ (*B, K, N) of operands already broadcast, with matmul_with_bias's bias."""
    if bias is None:
        return _MatMul.apply(a, b)
    along = (a.shape[-2], b.shape[-1])[bias_dim + 2]
    if bias.shape != (along,) or bias.device != a.device or bias.dtype is not a.dtype:
        raise RuntimeError(f"matmul: a bias for {'columns' if bias_dim == -1 else 'rows'} of the "
                           f"{tuple(a.shape[:-1]) + (b.shape[-1],)} product must be a {a.dtype.name} "
                           f"tensor of shape ({along},) on {a.device}, got {bias.dtype.name} "
                           f"{tuple(bias.shape)} on {bias.device}")
    return _MatMul.apply(a, b, bias, bias_dim)
