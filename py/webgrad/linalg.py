"""torch.linalg's names (those webgrad has). Matrix norms are reductions of |A| (sums, then the
largest or smallest); the spectral and nuclear norms need singular values, which webgrad lacks."""
import math

from ._tensor import _wrap_dim as wrap_dim
from .amp import autocast_op
from .ops.matmul import matmul
from .ops.reduce import amax, amin, vector_norm

__all__ = ["matmul", "matrix_norm", "norm", "vector_norm"]


@autocast_op
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """torch.linalg.matrix_norm over the two dims `dim` (rows, columns) of A: 'fro'; 1 / -1, the
    largest / smallest column sum of |A|; inf / -inf, the largest / smallest row sum."""
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        A = A.to(dtype)
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.name}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    rows, cols = (wrap_dim(d, A.ndim) for d in dim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs the singular values of A (an SVD), which "
                                  "webgrad does not have")
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    summed, across = (rows, cols) if abs(ord) == 1 else (cols, rows)
    out = (amax if ord > 0 else amin)(A.abs().sum(summed, keepdim=True), across, keepdim=True)
    return out if keepdim else out.reshape(tuple(s for d, s in enumerate(A.shape) if d not in (rows, cols)))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm over one dim (or, with ord None, of every element), a matrix
    norm over two (matrix_norm); with dim None and ord given, A must be 1-D or 2-D."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    elif ord is not None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        dims = tuple(range(A.ndim))
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if isinstance(ord, str) or len(dims) == 2:
        return matrix_norm(A, ord, dims, keepdim, dtype=dtype)
    return vector_norm(A, ord, dims, keepdim, dtype=dtype)
