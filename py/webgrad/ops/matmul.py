"""Matrix product with PyTorch's rules: 1-D operands are promoted and squeezed back, batch
dims broadcast. The backend multiplies (*B, M, K) @ (*B, K, N) with any strides, so the
transposes in the backward pass are free views."""
from ..autograd import Function
from .movement import broadcast_shapes
from .._tensor import Tensor


class _MatMul(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        shape = a.shape[:-1] + (b.shape[-1],)
        return Tensor(a.backend.matmul(a, b), shape, a.dtype, a.device)

    def backward(self, grad):
        a, b = self.a, self.b
        # A gradient comes out in its operand's layout: a transposed weight (x @ w.T in Linear) gets
        # (grad.mT @ x).mT, a view whose storage is w's layout, so the optimizer needs no copy.
        ga = gb = None
        if a.requires_grad:
            ga = (b @ grad.mT).mT if _transposed(a) else grad @ b.mT
        if b.requires_grad:
            gb = (grad.mT @ a).mT if _transposed(b) else a.mT @ grad
        return ga, gb


def _transposed(t):
    """A 2-D view of a row-major matrix's transpose: its first dim is the contiguous one."""
    return t.ndim == 2 and t._strides[0] == 1 and t._strides[1] != 1


def matmul(a, b):
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
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = a.expand(batch + a.shape[-2:])
    b = b.expand(batch + b.shape[-2:])
    out = _MatMul.apply(a, b)
    for dim in squeeze:
        out = out.squeeze(dim if dim == -1 or len(squeeze) == 1 else -1)
    return out
